#!/usr/bin/env python3
"""Prints the longest functions of our C++ and Go sources; fails when one is too long.

Usage: function_lengths.py [--root DIR] [--top N] [--max-lines N] [FILE...]

Without FILE arguments it reads the C++ files (*.cc, *.h) that git tracks under schema/,
ledger/, projections/, replay/, consumers/, ops/ and tests/, and the Go files of
ops/k8s/bridge/ (not vendored code). It prints the --top longest functions as
"file:line name lines", longest first, then "functions over 70 lines: N" (TIGER_STYLE's
limit, which docs/STYLE.md asks us to grow toward), and exits 1 when any function is longer
than --max-lines (100).

A function's lines count from its signature line to its closing brace, both included. The
scanner matches braces after blanking comments, string, character and raw string literals and
preprocessor lines; a function is a brace block that opens, at file, namespace or class scope,
after a parenthesised parameter list (C++), or after a top-level `func` (Go). Lambdas, local
classes and closures count toward the function that holds them.
"""

import argparse
import os
import re
import subprocess
import sys

CPP_DIRS = ("schema", "ledger", "projections", "replay", "consumers", "ops", "tests")
CPP_SUFFIXES = (".cc", ".h")
GO_DIR = "ops/k8s/bridge"
SUMMARY_LINES = 70
MAX_LINES_DEFAULT = 100
TOP_DEFAULT = 20


def comment_end(text, i):
    """The end of the comment that starts at offset i, or None when none starts there."""
    if text.startswith("//", i):
        j = text.find("\n", i)
        return len(text) if j < 0 else j
    if text.startswith("/*", i):
        j = text.find("*/", i + 2)
        return len(text) if j < 0 else j + 2
    return None


def closing_quote(text, i):
    """The offset of the quote that closes the literal opened at i (or of the line's end)."""
    j = i + 1
    while j < len(text) and text[j] != text[i] and text[j] != "\n":
        j += 2 if text[j] == "\\" else 1
    return min(j, len(text))


def raw_string_close(text, i):
    """For a C++ raw string R"delim( ... )delim" whose quote is at i: its closing quote."""
    prefix = re.search(r"(?:u8|[uUL])?R$", text[max(0, i - 3):i])
    if not prefix:
        return None
    before = i - len(prefix.group(0)) - 1
    if before >= 0 and (text[before].isalnum() or text[before] == "_"):
        return None  # an identifier ending in R, then a string
    paren = text.find("(", i)
    delim = text[i + 1:paren]
    end = text.find(")" + delim + '"', paren)
    return len(text) if end < 0 else end + len(delim) + 1


def is_digit_separator(text, i):
    """Whether the ' at i continues a number token (1'000'000) rather than opening a char."""
    k = i - 1
    while k >= 0 and (text[k].isalnum() or text[k] in "_'."):
        k -= 1
    return k + 1 < i and text[k + 1].isdigit()


def blank_source(text, cpp):
    """Returns text with comments and literals (and, in C++, preprocessor lines) blanked.

    Newlines are kept, so offsets and line numbers stay those of the original text.
    """
    out = list(text)
    n = len(text)
    i = 0
    line_start = True  # only white space so far on this line

    def blank(a, b):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if c == "\n":
            line_start = True
            i += 1
            continue
        if cpp and line_start and c == "#":
            # A preprocessor directive, with its backslash continuations.
            j = i
            while j < n and not (text[j] == "\n" and text[j - 1] != "\\"):
                j += 1
            blank(i, j)
            i = j
            continue
        if not c.isspace():
            line_start = False
        end = comment_end(text, i)
        if end is not None:
            blank(i, end)
            i = end
            continue
        close = None
        if cpp and c == '"':
            close = raw_string_close(text, i)
        elif not cpp and c == "`":
            close = text.find("`", i + 1)
            close = n if close < 0 else close
        if close is None and c in "\"'":
            if cpp and c == "'" and is_digit_separator(text, i):
                i += 1
                continue
            close = closing_quote(text, i)
        if close is not None:
            blank(i + 1, close)
            i = close + 1
            continue
        i += 1
    return "".join(out)


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


ACCESS = re.compile(r"^\s*(?:public|private|protected)\s*:(?!:)")
TEMPLATE = re.compile(r"^\s*template\s*<")
SCOPE_WORDS = re.compile(r"^(?:\[\[.*?\]\]\s*)*(?:(?:inline|export)\s+)?namespace\b|^extern\s*$")
CLASS_HEAD = re.compile(r"^(?:\[\[.*?\]\]\s*)*(?:class|struct|union)\b")
NAME_BEFORE_PAREN = re.compile(
    r"((?:[A-Za-z_]\w*\s*(?:<[^(){};]*>)?\s*::\s*)*~?\s*"
    r"(?:operator\s*(?:\(\)|[^\s(\w][^\s(]*|\w+)|[A-Za-z_]\w*))\s*$")
CONTROL = {"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype",
           "alignof", "static_assert", "requires"}


def skip_template(head):
    """Drops a leading `template <...>` clause (nested angle brackets included)."""
    m = TEMPLATE.match(head)
    if not m:
        return head
    depth = 0
    for k in range(m.end() - 1, len(head)):
        if head[k] == "<":
            depth += 1
        elif head[k] == ">":
            depth -= 1
            if depth == 0:
                return skip_template(head[k + 1:])
    return head


def top_level_paren(head):
    """Returns (start, end) of the first parenthesised group at depth 0, or None.

    Parentheses inside template arguments (`std::function<bool(int)> F()`) are not at depth 0.
    """
    depth = 0
    angle = 0
    start = None
    for k, c in enumerate(head):
        if depth == 0 and c == "<" and re.search(r"\w\s*$", head[:k]) and \
                not re.search(r"\boperator\s*<*$", head[:k]):
            angle += 1
        elif depth == 0 and c == ">" and angle > 0:
            angle -= 1
        if angle > 0:
            continue
        if c == "(":
            if depth == 0 and start is None:
                start = k
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0 and start is not None:
                return start, k
    return None


def classify_cpp(head):
    """Says what a `{` at declaration scope opens: 'scope', 'class', a function name, or None."""
    head = head.strip()
    while True:
        m = ACCESS.match(head)
        if not m:
            break
        head = head[m.end():].strip()
    if SCOPE_WORDS.search(head) or re.fullmatch(r'extern\s*(?:"\s*")?', head):
        return "scope"
    body = skip_template(head).strip()
    if CLASS_HEAD.match(body) and "(" not in body.split(":")[0]:
        return "class"
    if re.match(r"^(?:enum|typedef|using)\b", body):
        return None
    group = top_level_paren(body)
    if group is None:
        return None
    before = body[:group[0]]
    if re.search(r"\boperator\s*$", before):
        # operator()(...): the first group is the operator's name, the second its parameters.
        rest = top_level_paren(body[group[1] + 1:])
        if rest is None:
            return None
        before = body[:group[1] + 1]
        group = (group[1] + 1 + rest[0], group[1] + 1 + rest[1])
    after = body[group[1] + 1:].strip()
    if after.startswith(":") and not after.startswith("::") and re.search(r"[\w>]$", after):
        # A constructor's member initializer `: a_{x}`, not its body.
        return "member-init"
    # An initializer (`T x = Make(...) + U{`) is no function, unless it holds a lambda.
    if re.search(r"(?<![=!<>])=(?!=)", re.sub(r"operator\s*\S+", "", before)):
        lam = re.search(r"([A-Za-z_]\w*)\s*=\s*\[", before)
        return lam.group(1) if lam else None
    m = NAME_BEFORE_PAREN.search(before)
    if not m:
        return None
    name = re.sub(r"\s+", "", m.group(1))
    if name in CONTROL:
        return None
    if re.fullmatch(r"[A-Z][A-Z0-9_]+", name):
        # A macro such as TEST(Suite, Name): its arguments name the function.
        name += re.sub(r"\s+", " ", body[group[0]:group[1] + 1])
    return name


def cpp_functions(text):
    """Yields (start_line, name, lines) for each function of a C++ source."""
    code = blank_source(text, cpp=True)
    stack = []  # kinds of open braces: 'scope', 'class', 'function', 'block'
    head_start = 0
    paren = 0
    func_start = None
    for k, c in enumerate(code):
        if c == "(":
            paren += 1
        elif c == ")":
            paren -= 1
        in_decl_scope = all(kind in ("scope", "class") for kind in stack)
        if c == "{":
            if in_decl_scope and paren > 0:
                # A default argument `= {}`: part of the declaration's head.
                stack.append("keep")
                continue
            if in_decl_scope:
                head = code[head_start:k]
                kind = classify_cpp(head)
                if kind in ("scope", "class", "member-init"):
                    stack.append("keep" if kind == "member-init" else kind)
                    if kind == "member-init":
                        continue
                elif kind is None:
                    stack.append("block")
                else:
                    stack.append("function")
                    lead = len(head) - len(head.lstrip())
                    text_head = head[lead:]
                    while True:
                        m = ACCESS.match(text_head)
                        if not m:
                            break
                        lead += m.end()
                        text_head = text_head[m.end():]
                        skip = len(text_head) - len(text_head.lstrip())
                        lead += skip
                        text_head = text_head[skip:]
                    stripped = skip_template(text_head)
                    lead += len(text_head) - len(stripped)
                    lead += len(stripped) - len(stripped.lstrip())
                    func_start = (line_of(code, head_start + lead), kind)
            else:
                stack.append("block")
            head_start = k + 1
        elif c == "}":
            kind = stack.pop() if stack else "block"
            if kind == "keep":
                continue
            if kind == "function" and func_start is not None:
                start, name = func_start
                yield start, name, line_of(code, k) - start + 1
                func_start = None
            if all(kind in ("scope", "class") for kind in stack):
                head_start = k + 1
        elif c == ";" and in_decl_scope and paren == 0:
            head_start = k + 1


GO_FUNC = re.compile(r"^func\s*(?:\([^)]*\)\s*)?([A-Za-z_]\w*)")


def go_functions(text):
    """Yields (start_line, name, lines) for each top-level func of a Go source."""
    code = blank_source(text, cpp=False)
    depth = 0
    paren = 0
    open_func = None
    for k, c in enumerate(code):
        if c == "(":
            paren += 1
        elif c == ")":
            paren -= 1
        elif c == "{":
            if depth == 0 and paren == 0 and open_func is None:
                # gofmt starts each top-level declaration in column 0; a multi-line signature's
                # last line starts with `)`.
                start = code.rfind("\n", 0, k) + 1
                while start > 0 and (code[start] in " \t\n)" or start == k):
                    start = code.rfind("\n", 0, start - 1) + 1
                word = re.search(r"(\w+)\s*$", code[start:k])
                is_type = word is not None and word.group(1) in ("interface", "struct")
                m = GO_FUNC.match(code[start:k])
                if m and not is_type:
                    open_func = (line_of(code, start), m.group(1))
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0 and open_func is not None:
                start, name = open_func
                yield start, name, line_of(code, k) - start + 1
                open_func = None


def default_files(root):
    try:
        listed = subprocess.run(["git", "-C", root, "ls-files", "--cached", "--others",
                                 "--exclude-standard", "--", *CPP_DIRS],
                                check=True, capture_output=True, text=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        listed = []
        for top in CPP_DIRS:
            for dirpath, _, names in os.walk(os.path.join(root, top)):
                listed += [os.path.relpath(os.path.join(dirpath, f), root) for f in names]
    files = []
    for path in sorted(set(listed)):
        parts = path.split("/")
        if "vendor" in parts or "third_party" in parts:
            continue
        if not os.path.isfile(os.path.join(root, path)):
            continue  # tracked, but deleted in the work tree
        if path.endswith(CPP_SUFFIXES) or (path.startswith(GO_DIR + "/") and
                                           path.endswith(".go")):
            files.append(path)
    return files


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    parser.add_argument("--top", type=int, default=TOP_DEFAULT)
    parser.add_argument("--max-lines", type=int, default=MAX_LINES_DEFAULT)
    parser.add_argument("files", nargs="*")
    args = parser.parse_args()
    root = os.path.normpath(args.root)
    files = args.files or default_files(root)
    found = []
    for path in files:
        full = path if os.path.isabs(path) else os.path.join(root, path)
        with open(full, encoding="utf-8", errors="replace") as f:
            text = f.read()
        scan = go_functions if path.endswith(".go") else cpp_functions
        for start, name, lines in scan(text):
            found.append((lines, path, start, name))
    found.sort(key=lambda f: (-f[0], f[1], f[2]))
    for lines, path, start, name in found[:args.top]:
        print(f"{path}:{start} {name} {lines}")
    over_summary = sum(1 for f in found if f[0] > SUMMARY_LINES)
    too_long = [f for f in found if f[0] > args.max_lines]
    print(f"functions: {len(found)} in {len(files)} files")
    print(f"functions over {SUMMARY_LINES} lines: {over_summary}")
    print(f"functions over {args.max_lines} lines: {len(too_long)}")
    for lines, path, start, name in too_long:
        print(f"{path}:{start}: error: {name} is {lines} lines, more than {args.max_lines}",
              file=sys.stderr)
    return 1 if too_long else 0


if __name__ == "__main__":
    sys.exit(main())
