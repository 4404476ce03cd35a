"""Configuration: every kind of bad input gets one `sol: ` line naming the key or file and the
problem, the program runs on with its own results; SOL_STRICT=1 stops it before main."""
import os
import re
import textwrap

import pytest

from conftest import PROGRAMS, SOL, run, sol_lines

SDOT = str(PROGRAMS / "sdot")
GOOD = "sdot=32\n"

# name: (environment, sol.toml text or None, substrings the one sol: line must contain)
CASES = {
    "unknown_key": ({}, "[trace]\ndpth = 4\n", ["sol.toml:2:1", "unknown key 'trace.dpth'", "did you mean 'trace.depth'"]),
    "unknown_top_key": ({}, "backnd = 'native'\n", ["sol.toml:1:1", "unknown key 'backnd'", "did you mean 'backend'"]),
    "wrong_type": ({}, "[trace]\ndepth = 'deep'\n", ["sol.toml:2:9", "trace.depth must be an integer, not a string", "default 32"]),
    "bool_type": ({}, "strict = 1\n", ["sol.toml:1:10", "strict must be true or false"]),
    "malformed": ({}, "[trace\nenabled = true\n", ["sol.toml:1:", "malformed TOML", "table header not closed"]),
    # Malformed TOML in a person's words, at the mistake: the string's opening quote, the repeated key.
    "string_not_closed": ({}, 'log = "info"\nbackend = "reference\n',
                          ["sol.toml:2:11", "malformed TOML: string not closed", 'closing "']),
    "string_not_closed_at_end": ({}, "backend = 'reference", ["sol.toml:1:11", "string not closed", "closing '"]),
    "missing_equals": ({}, '[trace]\ndepth 4\n', ["sol.toml:2:7", "missing '=' after the key 'depth'"]),
    "duplicate_key": ({}, "[trace]\ndepth = 4\n  depth = 8\n", ["sol.toml:3:3", "duplicate key 'depth'"]),
    "duplicate_table": ({}, "[trace]\ndepth = 4\n[trace]\nenabled = true\n",
                        ["sol.toml:3:1", "duplicate table [trace]"]),
    "bare_word": ({}, "log = info\n", ["sol.toml:1:7", 'the value info needs quotes: "info"']),
    "missing_value": ({}, "log =\n", ["sol.toml:1:", "missing value after '='"]),
    "out_of_range_file": ({}, "[trace]\ndepth = 999\n", ["sol.toml:2:9", "trace.depth = 999 is out of range 1..256"]),
    "backend_table": ({}, "[backend.opencl]\ndevice = 0\n", ["backend must be a string", "[backends.NAME]"]),
    "unknown_backend_env": ({"SOL_BACKEND": "opencll"}, None, ["SOL_BACKEND='opencll'", "unknown backend 'opencll'", "did you mean 'opencl'"]),
    "unknown_backend_file": ({}, "backend = 'openbla'\n", ["sol.toml:1:11", "unknown backend 'openbla'", "did you mean 'openblas'"]),
    "empty_backend": ({"SOL_BACKEND": "native,"}, None, ["SOL_BACKEND='native,'", "empty backend name", 'using "native"']),
    "backend_list_typo_env": ({"SOL_BACKEND": "native,openblsa"}, None,
                              ["SOL_BACKEND='native,openblsa'", "unknown backend 'openblsa'", "did you mean 'openblas'",
                               'using "native"']),
    "backend_list_typo_file": ({}, "backend = 'native,openblsa'\n",
                               ["sol.toml:1:11", "unknown backend 'openblsa'", 'using "native"']),
    "backend_table_beside_key": ({}, "backend = 'native'\n[backend.opencl]\ndevice = 0\n",
                                 ["sol.toml:3:1", "malformed TOML", "[backends.NAME]", "the whole file is ignored"]),
    "not_a_number": ({"SOL_TRACE_DEPTH": "abc"}, None, ["SOL_TRACE_DEPTH='abc' is not a number", "using 32"]),
    "out_of_range_env": ({"SOL_TRACE_DEPTH": "0"}, None, ["SOL_TRACE_DEPTH='0' is out of range 1..256"]),
    "bad_bool_env": ({"SOL_TRACE": "maybe"}, None, ["SOL_TRACE='maybe' is not a boolean"]),
    "bad_log_level": ({"SOL_LOG": "verbose"}, None, ["SOL_LOG='verbose' is not a log level"]),
    "unknown_env": ({"SOL_TRACEDIR": "/tmp/x"}, None, ["unknown environment variable SOL_TRACEDIR", "did you mean 'SOL_TRACE_DIR'"]),
    "trace_dir_without_trace": ({"SOL_TRACE_DIR": "/tmp/x"}, None, ["SOL_TRACE_DIR is set but tracing is off", "SOL_TRACE=1"]),
    "missing_file": ({"SOL_CONFIG": "/nonexistent/sol.toml"}, None, ["/nonexistent/sol.toml", "No such file or directory"]),
    "unreadable_file": ({"SOL_CONFIG": "/"}, None, ["cannot read config file /", "Is a directory"]),
}


def write_config(tmp_path, text):
    if text is not None:
        (tmp_path / "sol.toml").write_text(text)


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_gets_one_line_and_the_program_runs_on(case, tmp_path):
    env, text, expect = CASES[case]
    write_config(tmp_path, text)
    r = run([SDOT], env=dict(env, HOME=str(tmp_path)), cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == GOOD, r.stderr
    lines = sol_lines(r.stderr)
    assert len(lines) == 1, r.stderr
    for s in expect:
        assert s in lines[0], lines[0]
    assert r.stderr == lines[0] + "\n"


@pytest.mark.parametrize("case", sorted(CASES))
def test_strict_mode_stops_before_main(case, tmp_path):
    env, text, _ = CASES[case]
    write_config(tmp_path, text)
    r = run([SDOT], env=dict(env, SOL_STRICT="1", HOME=str(tmp_path)), cwd=tmp_path)
    assert r.returncode == 78, (r.returncode, r.stderr)
    assert r.stdout == ""  # main never ran
    assert any("SOL_STRICT=1" in l for l in sol_lines(r.stderr))


def test_strict_mode_without_problems_runs(tmp_path):
    r = run([SDOT], env={"SOL_STRICT": "1", "HOME": str(tmp_path)}, cwd=tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (0, GOOD, "")


def test_good_file_is_silent_and_environment_wins(tmp_path):
    (tmp_path / "sol.toml").write_text(textwrap.dedent("""\
        backend = "native"
        log = "info"
        [trace]
        depth = 16
        """))
    r = run([SOL, "config"], env={"SOL_TRACE_DEPTH": "8", "HOME": str(tmp_path)}, cwd=tmp_path, preload=False)
    assert r.returncode == 0, r.stderr
    lines = {l.split("=")[0].strip(): l for l in r.stdout.splitlines() if not l.startswith("#")}
    assert '"native"' in lines["backend"] and "sol.toml:1:11" in lines["backend"]
    assert "= 8" in lines["trace.depth"] and "environment SOL_TRACE_DEPTH" in lines["trace.depth"]
    assert "= false" in lines["trace.enabled"] and "# default" in lines["trace.enabled"]


def test_config_search_order(tmp_path):
    """./sol.toml, then $XDG_CONFIG_HOME/sol/sol.toml, then ~/.config/sol/sol.toml."""
    home, xdg, cwd = tmp_path / "home", tmp_path / "xdg", tmp_path / "cwd"
    for d in (home / ".config" / "sol", xdg / "sol", cwd):
        d.mkdir(parents=True)
    (home / ".config" / "sol" / "sol.toml").write_text("log = 'debug'\n")
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(xdg)}

    def config_file():
        r = run([SOL, "config"], env=env, cwd=cwd, preload=False)
        return r.stdout.splitlines()[0].split("file: ")[1]

    assert config_file().endswith("home/.config/sol/sol.toml")
    (xdg / "sol" / "sol.toml").write_text("log = 'info'\n")
    assert config_file().endswith("xdg/sol/sol.toml")
    (cwd / "sol.toml").write_text("log = 'error'\n")
    assert config_file() == "sol.toml"


def test_example_config_is_valid(tmp_path):
    """config/sol.example.toml loads without a single problem (its keys and defaults are checked
    against the key table by the unit test config_test)."""
    from conftest import SOURCE
    r = run([SOL, "config"], env={"SOL_CONFIG": str(SOURCE / "config" / "sol.example.toml")}, preload=False)
    assert r.returncode == 0 and r.stderr == "", r.stderr


def keys_table():
    """scripts/keys_table.py, which makes docs/configuration.md's table from config/keys.def."""
    import importlib.util
    from conftest import SOURCE
    spec = importlib.util.spec_from_file_location("keys_table", SOURCE / "scripts" / "keys_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_configuration_page_has_the_key_table_of_keys_def():
    """docs/configuration.md's table is what scripts/keys_table.py makes of config/keys.def now."""
    kt = keys_table()
    on_page = kt.page_table(kt.PAGE.read_text())
    assert on_page is not None, "docs/configuration.md lacks the generated table's markers"
    assert on_page == kt.generated(), "docs/configuration.md's key table is stale: run scripts/keys_table.py --write"


def test_the_key_table_lists_every_key_sol_config_knows():
    """The generator reads keys.def as the loader does: each TOML name and variable that `sol config
    --keys` lists is a row of the page's table, with its default, and the table has no other row."""
    kt = keys_table()
    rows = [l for l in kt.page_table(kt.PAGE.read_text()).splitlines()[2:]]
    r = run([SOL, "config", "--keys"], preload=False)
    listed = [l.split() for l in r.stdout.splitlines() if l and not l.startswith(" ")]
    assert len(listed) >= 30 and len(listed) == len(rows), (len(listed), len(rows))
    for words, row in zip(listed, rows):
        for name in words[:2]:  # the TOML name and the variable; "-" where there is none
            assert name == "-" or "`%s`" % name in row, (name, row)
        default = words[words.index("default") + 1].rstrip(";")
        cells = row.split(" | ")
        assert cells[3] in ("`%s`" % default, "(none)" if default == "(none)" else None), (default, row)


def test_a_typo_in_a_backend_list_costs_only_that_entry(tmp_path):
    r = run([SOL, "config"], env={"SOL_BACKEND": "reference,openblsa,native", "HOME": str(tmp_path)},
            cwd=tmp_path, preload=False)
    assert r.returncode == 1 and len(sol_lines(r.stderr)) == 1, r.stderr  # sol config: 1 when it reports a problem
    assert 'backend = "reference,native"' in r.stdout and "SOL_BACKEND" in r.stdout, r.stdout


def test_every_list_of_backends_is_the_same():
    """One list of backend names (config/config.hpp, from backends/registry.def) behind the
    unknown-backend message, `sol run --help`, `sol config --keys`, `sol backends`,
    docs/configuration.md's SOL_BACKEND row and the example configuration."""
    from conftest import SOURCE
    r = run([SOL, "config"], env={"SOL_BACKEND": "nonesuch"}, preload=False)
    known = re.search(r"; known: ([a-z, ]+);", r.stderr).group(1)
    names = known.split(", ")
    assert names[:2] == ["auto", "native"] and "cuda" in names and "opencl" in names, known
    help_text = " ".join(run([SOL, "run", "--help"], preload=False).stdout.split())
    assert known in help_text, help_text
    keys = " ".join(run([SOL, "config", "--keys"], preload=False).stdout.split())
    assert known in keys, keys
    out = run([SOL, "backends"], preload=False).stdout
    listed = re.findall(r"^(\S+) +(?:available|unavailable|the program's own library)", out, re.M)
    assert listed == names[1:], out
    page_row = next(l for l in (SOURCE / "docs" / "configuration.md").read_text().splitlines()
                    if l.startswith("| `backend` | `SOL_BACKEND`"))
    assert known in page_row, page_row
    example = " ".join(l.lstrip("# ") for l in (SOURCE / "config" / "sol.example.toml").read_text().splitlines())
    assert known in example
