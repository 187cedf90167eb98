#!/usr/bin/env bash
# Makes a throwaway PKI for admitd's tests with the openssl CLI, into DIR:
#   ca.pem/ca.key            the CA admitd trusts for clients (--client-ca) and that signed it
#   server.pem/server.key    admitd's certificate (CN localhost; SAN localhost and 127.0.0.1)
#   NAME.pem/NAME.key        a client certificate with common name NAME, for every NAME given
#   foreign-ca.pem, foreign.pem/.key    a client certificate from another CA
#   expired.pem/.key         a client certificate of ca.pem that expired in 2020
# Usage: test_pki.sh DIR NAME...   (a NAME may hold '/', e.g. security.example.com/scanner;
# its files are named with '/' as '_')
set -euo pipefail
dir=$1; shift
mkdir -p "$dir"
cd "$dir"
quiet() { "$@" >/dev/null 2>&1 || { echo "test_pki: failed: $*" >&2; "$@"; exit 1; }; }

quiet openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 30 \
  -subj "/CN=admission-ledger test CA"
quiet openssl req -x509 -newkey rsa:2048 -nodes -keyout foreign-ca.key -out foreign-ca.pem \
  -days 30 -subj "/CN=someone else's CA"

# sign CA_PREFIX FILE CN [extra x509 args...]
sign() {
  local ca=$1 file=$2 cn=$3; shift 3
  # A '/' inside a -subj value is written '\/'.
  quiet openssl req -newkey rsa:2048 -nodes -keyout "$file.key" -out "$file.csr" \
    -subj "/CN=${cn//\//\\/}"
  quiet openssl x509 -req -in "$file.csr" -CA "$ca.pem" -CAkey "$ca.key" -CAcreateserial \
    -out "$file.pem" "$@"
  rm -f "$file.csr"
}

printf 'subjectAltName=DNS:localhost,DNS:127.0.0.1,IP:127.0.0.1\n' > server.ext
sign ca server localhost -days 30 -extfile server.ext
for name in "$@"; do
  sign ca "${name//\//_}" "$name" -days 30
done
sign foreign-ca foreign stranger -days 30

# An expired certificate needs explicit dates: `openssl ca` takes them.
mkdir -p expired-ca/new
: > expired-ca/index.txt
cat > expired-ca/ca.cnf <<CNF
[ca]
default_ca = test
[test]
dir = $PWD/expired-ca
database = \$dir/index.txt
new_certs_dir = \$dir/new
serial = \$dir/serial
default_md = sha256
policy = any
[any]
commonName = supplied
CNF
echo 01 > expired-ca/serial
quiet openssl req -newkey rsa:2048 -nodes -keyout expired.key -out expired.csr -subj "/CN=compliance"
quiet openssl ca -batch -config expired-ca/ca.cnf -cert ca.pem -keyfile ca.key -in expired.csr \
  -out expired.pem -startdate 20200101000000Z -enddate 20200102000000Z -notext
rm -f expired.csr
