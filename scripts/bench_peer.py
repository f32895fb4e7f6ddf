"""agent-ledger 0.2.1's PostgreSQL store through the executor bench's workload (see bench-peer).

Two pool settings: the library's documented one (psycopg's default: each store call is a
transaction, `BEGIN` sent before its statement and `COMMIT` when the connection goes back), and
autocommit, which spares those two round trips and is the peer's best case here.
"""

import asyncio
import sys
import time

from agent_ledger import EffectLedger, EffectLedgerOptions, ToolCall
from agent_ledger.stores.postgres import SCHEMA_SQL, PostgresStore
import psycopg
from psycopg_pool import AsyncConnectionPool

CALLS = 2_000
TASKS = 8
PER_TASK = 500
WARM_UP = 200
DATABASE = "balcao_bench_peer"


RAN = 0


async def noop(_effect):
    global RAN
    RAN += 1
    return {"ok": True}


def call(item: str) -> ToolCall:
    return ToolCall(workflow_id="bench", tool="noop", args={"item": item})


async def fresh_database(server: str) -> str:
    async with await psycopg.AsyncConnection.connect(server, autocommit=True) as admin:
        await admin.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        await admin.execute(f"CREATE DATABASE {DATABASE}")
    return server.rsplit("/", 1)[0] + "/" + DATABASE


async def measure(ledger: EffectLedger, prefix: str) -> dict[str, float]:
    rates = {}
    for phase in ("executed", "replay"):
        ran, started = RAN, time.perf_counter()
        for i in range(CALLS):
            assert await ledger.run(call(f"{prefix}-seq-{i}"), noop) == {"ok": True}
        rates[f"{phase} sequential"] = CALLS / (time.perf_counter() - started)
        assert RAN - ran == (CALLS if phase == "executed" else 0)
    for phase in ("executed", "replay"):

        async def task(t: int) -> None:
            for i in range(PER_TASK):
                assert await ledger.run(call(f"{prefix}-conc-{t}-{i}"), noop) == {"ok": True}

        ran, started = RAN, time.perf_counter()
        await asyncio.gather(*(task(t) for t in range(TASKS)))
        rates[f"{phase} {TASKS} × {PER_TASK}"] = TASKS * PER_TASK / (time.perf_counter() - started)
        assert RAN - ran == (TASKS * PER_TASK if phase == "executed" else 0)
    return rates


async def main(server: str) -> None:
    url = await fresh_database(server)
    rows = []
    for setting, kwargs in (("default pool", {}), ("autocommit", {"autocommit": True})):
        pool = AsyncConnectionPool(conninfo=url, min_size=TASKS, max_size=TASKS, kwargs=kwargs, open=False)
        await pool.open(wait=True)
        async with pool.connection() as conn:
            await conn.execute(SCHEMA_SQL)
        ledger = EffectLedger(EffectLedgerOptions(store=PostgresStore(pool=pool)))
        # Before the clock, as on Balcão's side: calls on keys of their own, each made twice,
        # then the planner's statistics.
        for i in range(WARM_UP):
            for _ in range(2):
                await ledger.run(call(f"{setting.replace(' ', '-')}-warm-{i}"), noop)
        async with pool.connection() as conn:
            await conn.execute("ANALYZE")
        # The handler counts its runs: each executed call runs it once, a replay never.
        for what, rate in (await measure(ledger, setting.replace(" ", "-"))).items():
            rows.append((setting, what, rate))
        await pool.close()
    print("| agent-ledger 0.2.1 pool | what | calls/s |")
    print("|---|---|---|")
    for setting, what, rate in rows:
        print(f"| {setting} | {what} | {rate:.0f} |")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
