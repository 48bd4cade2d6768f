"""glob, grep and ls: .gitignore honoured, hostile names, bounds, rg and its Python fallback alike."""

import os
import shutil

import pytest

from khaelor.tools.base import ToolError
from khaelor.tools.search import MAX_GLOB_RESULTS, grep_lines, run_glob, run_grep, run_ls
from tests.test_tools_files import make_ctx

HAS_RG = shutil.which("rg") is not None
BACKENDS = [False, pytest.param(True, marks=pytest.mark.skipif(not HAS_RG, reason="ripgrep not installed"))]


@pytest.fixture
def env(tmp_path):
    return make_ctx(tmp_path)


def tree(root, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture
def repo(env):
    """A workspace with root and nested .gitignore files, a .git directory and hostile names."""
    ctx, _ = env
    tree(
        ctx.workspace,
        {
            ".gitignore": "*.log\nbuild/\n!keep.log\n",
            "src/.gitignore": "generated.py\n",
            "src/app.py": "import os\nTODO = 1\n",
            "src/generated.py": "TODO = 2\n",
            "src/trace.log": "TODO trace\n",
            "src/deep/mod.py": "x = 'TODO'\n",
            "build/out.py": "TODO = 3\n",
            "debug.log": "TODO in log\n",
            "keep.log": "TODO kept\n",
            ".git/config": "TODO in git\n",
            ".hidden.py": "TODO hidden\n",
            "with space.py": "TODO space\n",
            "-dash.py": "TODO dash\n",
            "new\nline.py": "TODO newline\n",
        },
    )
    (ctx.workspace / "blob.bin").write_bytes(b"TODO\x00binary")
    return ctx


def test_glob_honours_gitignore_and_skips_git(repo):
    found = set(run_glob(repo, {"pattern": "**/*.py"}).splitlines())
    assert found == {"src/app.py", "src/deep/mod.py", ".hidden.py", "with space.py", "-dash.py", "'new\\nline.py'"}
    assert run_glob(repo, {"pattern": "*.log"}) == "keep.log"
    below = set(run_glob(repo, {"pattern": "**/*", "path": "src"}).splitlines())
    assert below == {".gitignore", "app.py", "deep/mod.py"}  # the root .gitignore still applies


def test_glob_star_stays_in_one_directory_and_sorts_newest_first(env):
    ctx, _ = env
    tree(ctx.workspace, {"a.py": "", "b.py": "", "sub/c.py": ""})
    for age, name in enumerate(["b.py", "a.py", "sub/c.py"]):
        os.utime(ctx.workspace / name, (1_000_000 - age * 100, 1_000_000 - age * 100))
    assert run_glob(ctx, {"pattern": "*.py"}).splitlines() == ["b.py", "a.py"]
    assert run_glob(ctx, {"pattern": "**/*.py"}).splitlines() == ["b.py", "a.py", "sub/c.py"]
    assert run_glob(ctx, {"pattern": "sub/?.py"}) == "sub/c.py"
    assert run_glob(ctx, {"pattern": "*.rs"}) == "no files match"


def test_glob_is_bounded(env):
    ctx, _ = env
    for n in range(MAX_GLOB_RESULTS + 5):
        (ctx.workspace / f"f{n}.txt").touch()
    lines = run_glob(ctx, {"pattern": "*.txt"}).splitlines()
    assert len(lines) == MAX_GLOB_RESULTS + 1 and lines[-1] == "… 5 more"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"pattern": ""}, "pattern must be a non-empty string"),
        ({"pattern": "../*.py"}, "relative to path"),
        ({"pattern": "*", "path": "missing"}, "directory not found"),
        ({"pattern": "*", "path": ".gitignore"}, "is not a directory"),
    ],
)
def test_glob_bad_arguments(repo, args, message):
    with pytest.raises(ToolError, match=message):
        run_glob(repo, args)


@pytest.mark.parametrize("use_rg", BACKENDS)
def test_grep_honours_gitignore_and_skips_binary(repo, use_rg):
    lines, total = grep_lines(repo, "TODO", repo.workspace, use_rg=use_rg)
    assert total == len(lines)
    assert sorted(lines) == sorted(
        [
            "-dash.py:1:TODO dash",
            ".hidden.py:1:TODO hidden",
            "keep.log:1:TODO kept",
            "'new\\nline.py':1:TODO newline",
            "src/app.py:2:TODO = 1",
            "src/deep/mod.py:1:x = 'TODO'",
            "with space.py:1:TODO space",
        ]
    )


@pytest.mark.parametrize("use_rg", BACKENDS)
def test_grep_glob_filter_and_single_file(repo, use_rg):
    lines, _ = grep_lines(repo, r"TODO\b", repo.workspace, glob="*.py", use_rg=use_rg)
    assert "keep.log:1:TODO kept" not in lines and "src/deep/mod.py:1:x = 'TODO'" in lines
    lines, _ = grep_lines(repo, r"^import", repo.workspace / "src" / "app.py", use_rg=use_rg)
    assert lines == ["app.py:1:import os"]
    lines, _ = grep_lines(repo, "TODO", repo.workspace / "src", use_rg=use_rg)
    assert lines == ["app.py:2:TODO = 1", "deep/mod.py:1:x = 'TODO'"]  # parent .gitignore applies


@pytest.mark.parametrize("use_rg", BACKENDS)
def test_grep_invalid_regex(repo, use_rg):
    with pytest.raises(ToolError, match="regex"):
        grep_lines(repo, "a(", repo.workspace, use_rg=use_rg)


@pytest.mark.parametrize("use_rg", BACKENDS)
def test_grep_bounds_matches_and_line_length(env, use_rg):
    ctx, _ = env
    tree(ctx.workspace, {"many.txt": "hit\n" * 600, "wide.txt": "hit" + "w" * 1000 + "\n"})
    lines, total = grep_lines(ctx, "hit", ctx.workspace, use_rg=use_rg)
    assert total == 601 and len(lines) == 500
    wide, _ = grep_lines(ctx, "hit", ctx.workspace / "wide.txt", use_rg=use_rg)
    assert len(wide[0]) < 600 and wide[0].endswith("… [line cut]")


def test_run_grep_reports_more_and_no_matches(env):
    ctx, _ = env
    tree(ctx.workspace, {"many.txt": "hit\n" * 600})
    out = run_grep(ctx, {"pattern": "hit"})
    assert out.splitlines()[-1] == "… 100 more matching lines" and out.startswith("many.txt:1:hit")
    assert run_grep(ctx, {"pattern": "absent"}) == "no matches"
    with pytest.raises(ToolError, match="path not found"):
        run_grep(ctx, {"pattern": "x", "path": "nowhere"})
    with pytest.raises(ToolError, match="glob must be a non-empty string"):
        run_grep(ctx, {"pattern": "x", "glob": 3})


def test_ls_marks_dirs_and_links_and_includes_hidden(env):
    ctx, _ = env
    tree(ctx.workspace, {"b.txt": "", ".env": "", "sub/x": "", "-dash": "", "new\nline": ""})
    (ctx.workspace / "link").symlink_to("b.txt")
    assert run_ls(ctx, {}).splitlines() == [
        "-dash",
        ".env",
        "b.txt",
        "link -> b.txt",
        "'new\\nline'",
        "sub/",
        "(6 entries, hidden ones included)",
    ]
    assert run_ls(ctx, {"path": "sub"}) == "x\n(1 entry, hidden ones included)"
    (ctx.workspace / "empty").mkdir()
    assert run_ls(ctx, {"path": "empty"}) == "(empty directory)"
    with pytest.raises(ToolError, match="is not a directory"):
        run_ls(ctx, {"path": "b.txt"})
