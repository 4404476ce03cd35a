#!/usr/bin/env python3
"""The table of configuration keys in docs/configuration.md, generated from config/keys.def.

    scripts/keys_table.py            print the table
    scripts/keys_table.py --write    replace the table in docs/configuration.md
    scripts/keys_table.py --check    exit 1 when the page's table is not the generated one

The table sits between the lines BEGIN and END below; the rest of the page is written by hand.
tests/integration/test_config.py checks the page against this script and the script's keys
against `sol config --keys`. Python's standard library only.
"""
import pathlib
import re
import sys

SOURCE = pathlib.Path(__file__).resolve().parents[1]
KEYS = SOURCE / "config" / "keys.def"
PAGE = SOURCE / "docs" / "configuration.md"
BEGIN = "<!-- keys: generated from config/keys.def by scripts/keys_table.py --write; do not edit -->"
END = "<!-- end of keys -->"
INT64_MAX = 9223372036854775807
FIELDS = ("field", "toml", "env", "kind", "trust", "default", "min", "max", "help")
TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([A-Za-z_0-9]+)|(,))')


def parse(text):
    """Every SOL_KEY(...) of keys.def as a dict of FIELDS (adjacent string literals joined)."""
    text = re.sub(r"//[^\n]*", "", text)
    keys = []
    for m in re.finditer(r"\bSOL_KEY\((.*?)\)\s*(?=SOL_KEY\(|$)", text, re.S):
        values, current, pos, body = [], None, 0, m.group(1).strip()
        while pos < len(body):
            t = TOKEN.match(body, pos)
            if not t:
                raise ValueError("keys.def: cannot read %r" % body[pos:pos + 40])
            pos = t.end()
            if t.group(3):
                values.append(current)
                current = None
            elif t.group(1) is not None:
                literal = bytes(t.group(1), "utf-8").decode("unicode_escape")
                current = literal if current is None else current + literal
            else:
                current = t.group(2)
        values.append(current)
        if len(values) != len(FIELDS):
            raise ValueError("keys.def: %d fields in SOL_KEY(%s...)" % (len(values), body[:40]))
        keys.append(dict(zip(FIELDS, values)))
    return keys


def cell(text):
    """Text as a table cell: pipes, emphasis characters and angle brackets escaped."""
    return re.sub(r"([|*])", r"\\\1", text).replace("<", "&lt;").replace(">", "&gt;")


def kind_and_default(key):
    if key["kind"] == "choice":
        words = key["default"].split("|")
        return "one of " + ", ".join("`%s`" % w for w in words), "`%s`" % words[0]
    kind = key["kind"].replace("_", " ")
    if key["kind"] == "integer":
        low, high = int(key["min"]), int(key["max"])
        kind += ", %d and up" % low if high == INT64_MAX else ", %d..%d" % (low, high)
    return kind, "`%s`" % key["default"] if key["default"] else "(none)"


def table(keys):
    lines = ["| TOML key | environment variable | type | default | meaning |", "|---|---|---|---|---|"]
    for key in keys:
        kind, default = kind_and_default(key)
        meaning = cell(key["help"])
        if key["trust"] == "trusted":
            meaning += " Trusted: not taken from `./sol.toml`."
        lines.append("| %s | %s | %s | %s | %s |" % ("`%s`" % key["toml"] if key["toml"] else "(environment only)",
                                                      "`%s`" % key["env"] if key["env"] else "(file only)",
                                                      kind, default, meaning))
    return "\n".join(lines)


def generated():
    return table(parse(KEYS.read_text()))


def page_table(page_text):
    """The table between the markers of the page, or None without them."""
    m = re.search(re.escape(BEGIN) + r"\n(.*?)" + re.escape(END), page_text, re.S)
    return m.group(1).rstrip("\n") if m else None


def main(argv):
    if argv[1:] == []:
        print(generated())
        return 0
    text = PAGE.read_text()
    if page_table(text) is None:
        print("keys_table.py: %s lacks the markers %s ... %s" % (PAGE, BEGIN, END), file=sys.stderr)
        return 1
    if argv[1:] == ["--check"]:
        if page_table(text) != generated():
            print("keys_table.py: the key table of %s is not config/keys.def's: run "
                  "scripts/keys_table.py --write" % PAGE, file=sys.stderr)
            return 1
        return 0
    if argv[1:] == ["--write"]:
        start = text.index(BEGIN) + len(BEGIN) + 1
        PAGE.write_text(text[:start] + generated() + "\n" + text[text.index(END):])
        return 0
    print(__doc__.strip(), file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
