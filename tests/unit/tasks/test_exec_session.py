import asyncio

from posttrain.sandbox import SandboxPool
from posttrain.tasks.exec_session import ExecSession


def test_files_and_cwd_persist_but_shell_variables_do_not():
    async def go():
        pool = SandboxPool()
        try:
            s = ExecSession(pool)
            await s.write_file("a.txt", "one\n")
            await s.snapshot()
            r1 = await s.run("mkdir sub && cd sub && echo two > b.txt && X=5")
            r2 = await s.run("pwd; cat ../a.txt b.txt; echo \"x=$X\"")
            return r1, r2, await s.diff()
        finally:
            await pool.close()

    r1, r2, diff = asyncio.run(go())
    assert r1.status == "ok"
    assert r2.stdout.splitlines()[1:] == ["one", "two", "x="]
    assert r2.stdout.splitlines()[0].endswith("/sub")
    assert [(c.path, c.change) for c in diff] == [("sub/b.txt", "added")]
