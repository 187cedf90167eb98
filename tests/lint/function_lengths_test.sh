#!/usr/bin/env bash
# Proves that ops/scripts/function_lengths.py can fail, and that its scanner is not fooled by
# braces in strings, characters, raw strings, comments, macros, default arguments, member
# initializers or Go type literals: each probe is a file written here and scanned alone.
# Usage: function_lengths_test.sh SOURCE_DIR
set -uo pipefail
script=$1/ops/scripts/function_lengths.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# body N: N lines of statements.
body() { for ((i = 0; i < $1; i++)); do echo "  x += $i;"; done; }

# A function of exactly N lines (signature and closing brace included) named NAME.
cpp_function() {
  echo "int $1(int x) {"
  body $(($2 - 3))
  echo "  return x;"
  echo "}"
}

scan() {
  out=$(python3 "$script" --root "$work" "$@" 2>"$work/stderr"); rc=$?
}

# 101 lines fail, 100 pass.
cpp_function TooLong 101 >"$work/long.cc"
scan long.cc
[ "$rc" = 1 ] || fail "a 101-line function passed (exit $rc): $out"
[[ "$out" == *"long.cc:1 TooLong 101"* ]] || fail "101-line function not listed: $out"
grep -q "long.cc:1: error: TooLong is 101 lines" "$work/stderr" || fail "no error line"
cpp_function JustRight 100 >"$work/ok.cc"
scan ok.cc
[ "$rc" = 0 ] || fail "a 100-line function failed (exit $rc): $out"
[[ "$out" == *"functions over 70 lines: 1"* ]] || fail "summary: $out"

# Braces that open nothing: strings, characters, raw strings, comments, digit separators,
# preprocessor lines. Tricky() is 7 lines; the class and namespace are scopes, not functions.
cat >"$work/tricky.cc" <<'CPP'
#define OPEN {
namespace n {
class C : public B {
 public:
  C(int a, Opts o = {}) : a_{a}, b_(o) {}
  bool operator()(int v) const { return v > 1'000'000; }
  int Tricky() const {
    const char* s = "}}} \" {";  // }
    char c = '}';
    auto raw = R"x(}")x";
    /* } */ int n = 1'000;
    return n + (c == '{');
  }
};
}  // namespace n
TEST(Suite, Name) {
  EXPECT_TRUE(true);
}
CPP
scan --top 10 tricky.cc
[ "$rc" = 0 ] || fail "tricky.cc failed (exit $rc): $out"
for want in "tricky.cc:7 Tricky 7" "tricky.cc:5 C 1" "tricky.cc:6 operator() 1" \
            "tricky.cc:16 TEST(Suite, Name) 3" "functions: 4 in 1 files"; do
  [[ "$out" == *"$want"* ]] || fail "expected '$want' in: $out"
done

# Go: a multi-line signature, a method, and interface{} / struct{} that open no body.
{
  echo "package p"
  echo "type T struct{ a interface{} }"
  echo "func (t *T) Long("
  echo "	v interface{},"
  echo ") error {"
  echo '	s := "}"'
  echo '	r := `}`'
  for ((i = 0; i < 94; i++)); do echo "	_ = struct{}{}"; done
  echo "	return nil"
  echo "}"
} >"$work/long.go"
scan long.go
[ "$rc" = 1 ] || fail "a 101-line Go function passed (exit $rc): $out"
[[ "$out" == *"long.go:3 Long 101"* ]] || fail "Go function not measured: $out"

if [ "$failures" -ne 0 ]; then
  echo "function_lengths_test: $failures failure(s)" >&2
  exit 1
fi
echo "function_lengths_test: all passed"
