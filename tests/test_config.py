"""Config files, their merge, and one-line errors that name file, line and key."""

import os
from datetime import datetime
from pathlib import Path

import pytest

from khaelor.config import Config, Rule, config_files, load_config, read_yaml
from khaelor.cost import PriceTable
from khaelor.env import Env
from khaelor.errors import ConfigError


@pytest.fixture
def env(tmp_path) -> Env:
    return Env(environ={"KHAELOR_HOME": str(tmp_path / "home"), "HOME": str(tmp_path / "person")},
               cwd=tmp_path / "cwd")


@pytest.fixture
def ws(tmp_path) -> Path:
    path = tmp_path / "ws"
    (path / ".khaelor").mkdir(parents=True)
    return path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def user(env, text):
    return write(env.home / "config.yaml", text)


def project(ws, text):
    return write(ws / ".khaelor" / "config.yaml", text)


def local(ws, text):
    return write(ws / ".khaelor" / "config.local.yaml", text)


def error_of(env, ws, overrides=None) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(env, ws, overrides)
    message = str(caught.value)
    assert "\n" not in message and message == caught.value.message
    return message


# --- files and merge -----------------------------------------------------------


def test_no_files_gives_the_defaults(env, ws):
    config = load_config(env, ws)
    assert config == Config()
    assert (config.model, config.max_tokens, config.permission_mode) == ("claude-sonnet-5-5", 16000, "default")
    assert (config.context.auto_compact_at, config.bash.timeout) == (0.92, 120)
    assert (config.tool_output.max_inline, config.tool_output.cap_total) == (30000, 1073741824)
    assert (config.api.max_attempts, config.api.initial_backoff, config.api.max_backoff, config.api.timeout) \
        == (6, 1.0, 30.0, 600)
    assert config.session_dir is None and config.pricing == {} and config.sources == []


def test_config_files_in_merge_order(env, ws):
    assert config_files(env, ws) == [
        ("user", env.home / "config.yaml"),
        ("project", ws / ".khaelor" / "config.yaml"),
        ("local", ws / ".khaelor" / "config.local.yaml"),
    ]


def test_later_sources_win_for_scalars(env, ws):
    u = user(env, "model: from-user\nmax_tokens: 100\nbash:\n  timeout: 5\n")
    p = project(ws, "model: from-project\npermission_mode: plan\n")
    l = local(ws, "model: from-local\ncontext:\n  auto_compact_at: 0.5\n")
    config = load_config(env, ws, {"model": "from-cli", "api": {"max_attempts": 2}})
    assert config.model == "from-cli"
    assert (config.max_tokens, config.bash.timeout, config.permission_mode) == (100, 5.0, "plan")
    assert (config.context.auto_compact_at, config.api.max_attempts) == (0.5, 2)
    assert config.sources == [u, p, l]
    assert load_config(env, ws).model == "from-local"


def test_permission_rules_accumulate_with_their_sources(env, ws):
    u = user(env, "permissions:\n  allow:\n    - bash: git log *\n")
    p = project(ws, "# project rules\npermissions:\n  allow:\n    - {edit: \"src/**\"}\n  deny:\n    - \"read: ~/.ssh/**\"\n")
    l = local(ws, "permissions:\n  allow: [read]\n")
    config = load_config(env, ws, {"permissions": {"allow": ["bash: npm test"], "ask": [{"bash": "git push *"}]}})
    assert config.rules("allow") == [
        Rule("bash", "git log *", "user", f"{u}:3"),
        Rule("edit", "src/**", "project", f"{p}:4"),
        Rule("read", None, "local", f"{l}:2"),
        Rule("bash", "npm test", "cli", "command line"),
    ]
    assert config.rules("deny") == [Rule("read", "~/.ssh/**", "project", f"{p}:6")]
    assert config.rules("ask") == [Rule("bash", "git push *", "cli", "command line")]


def test_rule_forms_and_whitespace(env, ws):
    project(ws, 'permissions:\n  deny:\n    - " bash :  rm -rf * "\n    - ls\n    - grep: "a:b"\n')
    assert [(r.tool, r.pattern) for r in load_config(env, ws).rules("deny")] == \
        [("bash", "rm -rf *"), ("ls", None), ("grep", "a:b")]


def test_rules_rejects_an_unknown_kind():
    with pytest.raises(ValueError):
        Config().rules("maybe")


def test_empty_file_is_an_empty_config_but_is_listed(env, ws):
    p = project(ws, "# nothing yet\n")
    config = load_config(env, ws)
    assert config.sources == [p]
    assert config.model == Config().model


def test_null_sections_are_empty(env, ws):
    project(ws, "permissions:\n  allow:\ncontext:\n")
    assert load_config(env, ws).rules("allow") == []


def test_ints_are_accepted_for_numbers_and_kept_as_floats(env, ws):
    project(ws, "bash: {timeout: 5}\ncontext: {auto_compact_at: 1}\n")
    config = load_config(env, ws)
    assert config.bash.timeout == 5.0 and isinstance(config.bash.timeout, float)
    assert config.context.auto_compact_at == 1.0


def test_session_dir_expands_home_and_is_relative_to_its_file(env, ws, tmp_path):
    user(env, "session_dir: ~/sessions\n")
    assert load_config(env, ws).session_dir == tmp_path / "person" / "sessions"
    project(ws, "session_dir: store\n")
    assert load_config(env, ws).session_dir == ws / ".khaelor" / "store"
    assert load_config(env, ws, {"session_dir": "here"}).session_dir == env.cwd / "here"
    assert load_config(env, ws, {"session_dir": "/abs"}).session_dir == Path("/abs")


def test_pricing_overrides_are_validated_and_replace_per_model(env, ws):
    user(env, 'pricing:\n  my-model:\n    - {input: "1", output: "2", cache_write_5m: "3",'
              ' cache_write_1h: "4", cache_read: "0.005"}\n')
    local(ws, 'pricing:\n  claude-opus-5-5: {input: "9", output: "9", cache_write_5m: "9",'
              ' cache_write_1h: "9", cache_read: "9"}\n')
    config = load_config(env, ws)
    assert sorted(config.pricing) == ["claude-opus-5-5", "my-model"]
    table = PriceTable.load(config.pricing)
    assert table.rates("my-model", datetime(2026, 11, 1), 10).cache_read == 5
    assert table.rates("claude-opus-5-5", datetime(2026, 11, 1), 10).input == 9000


# --- errors -----------------------------------------------------------------------


def test_invalid_yaml_names_line_and_column(env, ws):
    p = project(ws, "model: x\npermissions: [read\n")
    assert error_of(env, ws) == f"{p}:3:1: invalid YAML: expected ',' or ']', but got '<stream end>'"


def test_invalid_yaml_bad_indentation(env, ws):
    p = project(ws, "bash:\n  timeout: 3\n    x: 1\n")
    assert error_of(env, ws).startswith(f"{p}:3:6: invalid YAML: mapping values are not allowed")


def test_top_level_must_be_a_mapping(env, ws):
    p = project(ws, "- model\n")
    assert error_of(env, ws) == f"{p}: expected a mapping of settings"
    p.write_text("")
    assert error_of(env, ws, ["model"]) == "command line: expected a mapping of settings"


def test_unknown_nested_key_suggests_the_close_one(env, ws):
    p = project(ws, "model: x\ncontext:\n  auto_compact: 0.5\n")
    assert error_of(env, ws) == \
        f"{p}:3: unknown key 'context.auto_compact' (did you mean 'context.auto_compact_at'?)"


def test_unknown_key_without_suggestion(env, ws):
    p = project(ws, "model: x\n\nzzz: 1\n")
    assert error_of(env, ws) == f"{p}:3: unknown key 'zzz'"


def test_sources_is_not_a_setting(env, ws):
    p = project(ws, "sources: []\n")
    assert error_of(env, ws).startswith(f"{p}:1: unknown key 'sources'")


def test_wrong_type_names_key_type_and_value(env, ws):
    u = user(env, "bash:\n  timeout: abc\n")
    assert error_of(env, ws) == f"{u}:2: 'bash.timeout' must be a number, not str ('abc')"


def test_a_bool_is_not_a_number(env, ws):
    p = project(ws, "api:\n  initial_backoff: 1\n  timeout: yes\n")
    assert error_of(env, ws) == f"{p}:3: 'api.timeout' must be a number, not bool (true)"


def test_a_float_is_not_an_integer(env, ws):
    p = project(ws, "max_tokens: 1.5\n")
    assert error_of(env, ws) == f"{p}:1: 'max_tokens' must be an integer, not float (1.5)"


@pytest.mark.parametrize("text, message", [
    ("context: {auto_compact_at: 0}", "'context.auto_compact_at' must be greater than 0 and at most 1, not 0"),
    ("context: {auto_compact_at: 1.5}", "'context.auto_compact_at' must be greater than 0 and at most 1, not 1.5"),
    ("bash: {timeout: -1}", "'bash.timeout' must be greater than 0, not -1"),
    ("bash: {timeout: .inf}", "'bash.timeout' must be a finite number, not inf"),
    ("api: {max_attempts: 0}", "'api.max_attempts' must be at least 1, not 0"),
    ("max_tokens: 0", "'max_tokens' must be greater than 0, not 0"),
    ("tool_output: {cap_total: '1G'}", "'tool_output.cap_total' must be an integer, not str ('1G')"),
    ("model: 5", "'model' must be a string, not int (5)"),
    ("bash: 5", "'bash' must be a mapping, not int (5)"),
    ("session_dir: [a]", "'session_dir' must be a path string, not list"),
])
def test_values_out_of_range(env, ws, text, message):
    p = project(ws, text + "\n")
    assert error_of(env, ws) == f"{p}:1: {message}"


def test_enumeration_lists_allowed_values(env, ws):
    p = project(ws, "permission_mode: auto\n")
    assert error_of(env, ws) == \
        f"{p}:1: 'permission_mode' must be one of default, accept-edits, plan, bypass, not 'auto'"
    project(ws, "permission_mode: acceptedits\n")
    assert error_of(env, ws).endswith("not 'acceptedits' (did you mean 'accept-edits'?)")


def test_unknown_tool_names_file_and_line(env, ws):
    p = project(ws, "permissions:\n  allow:\n    - read\n    - bsh: git status\n")
    assert error_of(env, ws) == f"{p}:4: 'permissions.allow[1]' names unknown tool 'bsh' (did you mean 'bash'?)"


def test_unknown_tool_without_suggestion_lists_tools(env, ws):
    p = project(ws, "permissions:\n  deny: ['webfetch: *']\n")
    assert error_of(env, ws) == (f"{p}:2: 'permissions.deny[0]' names unknown tool 'webfetch' "
                                 "(tools are read, write, edit, bash, glob, grep, ls, process)")


@pytest.mark.parametrize("item, message", [
    ("'bash:'", "'permissions.ask[0]' has an empty pattern; write just 'bash' to match every bash call"),
    ("{bash: 3}", "'permissions.ask[0].bash' must be a pattern string, not int (3)"),
    ("{bash: a, read: b}", "'permissions.ask[0]' must be a rule such as 'bash' or 'bash: git log *', not mapping"),
])
def test_malformed_rules(env, ws, item, message):
    p = project(ws, f"permissions:\n  ask:\n    - {item}\n")
    assert error_of(env, ws) == f"{p}:3: {message}"


def test_rules_must_be_a_list(env, ws):
    p = project(ws, "permissions:\n  allow: bash\n")
    assert error_of(env, ws) == f"{p}:2: 'permissions.allow' must be a list of rules, not str ('bash')"


def test_invalid_price_override_names_file_and_line(env, ws):
    p = project(ws, "pricing:\n  m:\n    - input: 0.5\n")
    assert error_of(env, ws) == (
        f"{p}:3: 'pricing.m[0]' is missing 'output', 'cache_write_5m', 'cache_write_1h', 'cache_read'")
    project(ws, 'pricing:\n  m:\n    - {input: 0.5, output: "1", cache_write_5m: "1", cache_write_1h: "1", cache_read: "1"}\n')
    assert error_of(env, ws).startswith(f"{p}:3: 'pricing.m[0].input' must be a quoted decimal string")


def test_duplicate_key(env, ws):
    p = project(ws, "model: a\nmodel: b\n")
    assert error_of(env, ws) == f"{p}:2: duplicate key 'model'"


def test_unsafe_tag_is_refused(env, ws):
    p = project(ws, "model: !!python/object/apply:os.system ['true']\n")
    assert error_of(env, ws).startswith(f"{p}:1:8: invalid YAML: ")


def test_recursive_alias_is_bounded(env, ws):
    p = project(ws, "model: &a [*a]\n")
    assert error_of(env, ws).startswith(f"{p}:1:")


def test_cli_overrides_are_validated(env, ws):
    assert error_of(env, ws, {"max_tokens": "many"}) == "command line: 'max_tokens' must be an integer, not str ('many')"
    assert error_of(env, ws, {"permission_mode": "yolo"}).startswith("command line: 'permission_mode' must be one of")
    assert error_of(env, ws, {"bash": {"timout": 3}}) == \
        "command line: unknown key 'bash.timout' (did you mean 'bash.timeout'?)"
    assert error_of(env, ws, {"permissions": {"allow": ["curl"]}}).startswith(
        "command line: 'permissions.allow[0]' names unknown tool 'curl'")


def test_a_directory_in_place_of_the_file(env, ws):
    (ws / ".khaelor" / "config.local.yaml").mkdir()
    assert error_of(env, ws) == f"{ws / '.khaelor' / 'config.local.yaml'}: cannot read config: it is a directory"


def test_invalid_utf8(env, ws):
    path = ws / ".khaelor" / "config.yaml"
    path.write_bytes(b"model: caf\xe9\n")
    assert error_of(env, ws) == f"{path}: cannot read config: not valid UTF-8 (byte 10)"


def test_oversized_file_is_refused(env, ws):
    path = project(ws, "# " + "x" * (1 << 20) + "\n")
    assert error_of(env, ws) == f"{path}: cannot read config: larger than 1 MiB"


def test_broken_symlink_is_reported(env, ws, tmp_path):
    link = ws / ".khaelor" / "config.yaml"
    link.symlink_to(tmp_path / "nowhere")
    assert error_of(env, ws) == f"{link}: cannot read config: broken symbolic link"


def test_a_fifo_is_not_read(env, ws):
    path = ws / ".khaelor" / "config.yaml"
    os.mkfifo(path)
    assert error_of(env, ws) == f"{path}: cannot read config: not a regular file"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file(env, ws):
    path = project(ws, "model: x\n")
    path.chmod(0)
    try:
        assert error_of(env, ws) == f"{path}: cannot read config: Permission denied"
    finally:
        path.chmod(0o644)


def test_read_yaml_records_lines_of_keys_and_items(tmp_path):
    path = write(tmp_path / "a.yaml", "a:\n  b:\n    - x\n    - y: 1\n")
    document = read_yaml(path)
    assert document.data == {"a": {"b": ["x", {"y": 1}]}}
    assert document.where(("a", "b", 1, "y")) == f"{path}:4"
    assert document.where(("a", "nope")) == f"{path}:1"
    assert document.where(()) == str(path)
    assert read_yaml(tmp_path / "missing.yaml") is None
