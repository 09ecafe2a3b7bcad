"""The user guide's Python examples, run as written: every ```python block of a Markdown page
(docs/user/python.md) that holds doctest lines (>>>) is run with doctest against the daemon at
$TRANSPOSED_SERVER (CTest python_readme_test runs it under testing/with_daemon: a fresh daemon,
CPU backend, empty cache). A page without such a block fails.

    readme_test.py docs/user/python.md
"""
import doctest
import os
import re
import sys


def blocks(text):
    """(line number, code) of every ```python block with doctest lines."""
    for m in re.finditer(r"^```python\n(.*?)^```$", text, re.M | re.S):
        if re.search(r"^>>> ", m.group(1), re.M):
            yield text.count("\n", 0, m.start(1)) + 1, m.group(1)


def main(path):
    if not os.environ.get("TRANSPOSED_SERVER"):
        print("readme_test: TRANSPOSED_SERVER is not set (run under with_daemon)", file=sys.stderr)
        return 1
    text = open(path, encoding="utf-8").read()
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    found = 0
    for line, code in blocks(text):
        found += 1
        test = parser.get_doctest(code, {}, f"{os.path.basename(path)}:{line}", path, line - 1)
        runner.run(test)
    results = runner.summarize(verbose=False)
    print(f"readme_test: {found} block(s), {results.attempted} examples, "
          f"{results.failed} failed")
    if found == 0:
        print(f"readme_test: no ```python block with >>> lines in {path}", file=sys.stderr)
        return 1
    return 1 if results.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
