"""Fuzz every decoder of the project (src/m2mc/fuzz_targets.py) and print JSON counts.

    python bench/fuzz.py --inputs 1000000          # what `make fuzz` runs
    python bench/fuzz.py --inputs 20000 --targets group.frame,m2mp.layer
    python bench/fuzz.py --list

Engine: atheris (libFuzzer, coverage-guided, one subprocess per target) when it
is installed, else the project's own coverage-guided mutational fuzzer
(m2mc.fuzzer); ``--engine`` forces one. Each decoder runs ``--inputs``
inputs. Only the target's typed errors may come out (DecodeError, or
ConfigError for user input); every outcome is counted by type. Any other
exception, or a bounded table over its bound, is a crash: the run goes on with
the other targets, the crashing input is kept (atheris: under ``--artifacts``),
and the exit status is 1.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=100_000, help="inputs per decoder")
    parser.add_argument("--targets", default="", help="comma-separated target names (all)")
    parser.add_argument("--engine", choices=("auto", "atheris", "builtin"), default="auto")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-len", type=int, default=4096)
    parser.add_argument("--artifacts", default="fuzz-artifacts",
                        help="directory for crashing inputs (atheris)")
    parser.add_argument("--list", action="store_true", help="list the targets and exit")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--result", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args(argv)
    if args.worker:
        return _atheris_worker(args, rest)
    if args.inputs < 1:
        parser.error("--inputs must be >= 1")

    from m2mc.fuzz_targets import load_targets

    names = [n for n in args.targets.split(",") if n]
    targets, unavailable = load_targets(names or None)
    if args.list:
        for target in targets:
            print(target.name)
        return 0
    engine = args.engine
    if engine == "auto":
        engine = "atheris" if _have_atheris() else "builtin"
    elif engine == "atheris" and not _have_atheris():
        print("atheris is not installed: pip install atheris", file=sys.stderr)
        return 2
    results: dict[str, Any] = {}
    for target in targets:
        started = time.perf_counter()
        if engine == "atheris":
            result = _run_atheris(target.name, args)
        else:
            result = _run_builtin(target, args)
        seconds = time.perf_counter() - started
        result["seconds"] = round(seconds, 2)
        fuzzing = result.get("worker_seconds", seconds)  # atheris: without start-up
        result["inputs_per_second"] = round(result.get("inputs", 0) / max(fuzzing, 1e-9))
        results[target.name] = result
        print(json.dumps({"target": target.name, **result}), file=sys.stderr, flush=True)
    crashed = [name for name, r in results.items() if r.get("crashes")]
    print(json.dumps({"engine": engine, "inputs_per_target": args.inputs,
                      "targets": results, "unavailable": unavailable,
                      "crashed": crashed, "ok": not crashed}, indent=1))
    return 1 if crashed else 0


def _have_atheris() -> bool:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return False
    return True


def _run_builtin(target: Any, args: argparse.Namespace) -> dict[str, Any]:
    from m2mc.fuzzer import MutationalFuzzer

    fuzzer = MutationalFuzzer(target, random.Random(f"{args.seed}:{target.name}"),
                              max_len=args.max_len)
    report = fuzzer.run(args.inputs).as_dict()
    for crash in fuzzer.report.crashes:
        print(f"CRASH in {target.name}: {crash.error}\n{crash.traceback}", file=sys.stderr)
    return report


def _run_atheris(name: str, args: argparse.Namespace) -> dict[str, Any]:
    artifacts = Path(args.artifacts).resolve()
    with tempfile.TemporaryDirectory(prefix="m2mc-fuzz-") as tmp:
        result_path = Path(tmp) / "result.json"
        log_path = Path(tmp) / "libfuzzer.log"
        command = [sys.executable, str(HERE), "--worker", name, "--inputs", str(args.inputs),
                   "--seed", str(args.seed), "--max-len", str(args.max_len),
                   "--artifacts", str(artifacts), "--result", str(result_path)]
        with log_path.open("wb") as log:
            status = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT,
                                    check=False).returncode
        if status == 0 and result_path.exists():
            result: dict[str, Any] = json.loads(result_path.read_text())
            return result
        tail = log_path.read_text(errors="replace").splitlines()[-40:]
        print(f"CRASH in {name} (exit {status}):\n" + "\n".join(tail), file=sys.stderr)
        partial = json.loads(result_path.read_text()) if result_path.exists() else {}
        return {**partial, "crashes": 1, "exit_status": status, "log_tail": tail[-12:]}


def _atheris_worker(args: argparse.Namespace, rest: list[str]) -> int:
    """One target under libFuzzer; writes its counts to --result after --inputs inputs."""
    import atheris

    with atheris.instrument_imports(include=["m2mc", "m2mc_chat"]):
        from m2mc.fuzz_targets import load_targets

        targets, _ = load_targets([args.worker])
    target = targets[0]
    max_len = min(args.max_len, target.max_len or args.max_len)
    outcomes: dict[str, int] = {}
    count = 0
    started = time.perf_counter()
    result_path = Path(args.result)

    def finish() -> None:
        result = {"inputs": count, "outcomes": dict(sorted(outcomes.items())), "crashes": 0,
                  "worker_seconds": round(time.perf_counter() - started, 2)}
        result_path.write_text(json.dumps(result))

    def test_one_input(data: bytes) -> None:
        nonlocal count
        count += 1
        try:
            target.run(data)
            outcome = "ok"
        except target.expected as exc:
            outcome = type(exc).__name__
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if count % 50_000 == 0:
            finish()  # a crash later still leaves the counts so far
        if count >= args.inputs:
            finish()
            sys.stdout.flush()
            os._exit(0)

    corpus = result_path.parent / "corpus"  # inside the parent's temporary directory
    corpus.mkdir(exist_ok=True)
    for index, seed in enumerate(target.seeds()):
        (corpus / f"seed-{index}").write_bytes(seed[:max_len])
    Path(args.artifacts).mkdir(parents=True, exist_ok=True)
    libfuzzer_args = [sys.argv[0], str(corpus), f"-seed={args.seed}",
                      f"-max_len={max_len}", "-timeout=30", "-rss_limit_mb=2048",
                      f"-artifact_prefix={args.artifacts}/{target.name}-",
                      f"-runs={args.inputs + 1000}", *rest]
    atheris.Setup(libfuzzer_args, test_one_input)
    atheris.Fuzz()
    finish()  # only reached if libFuzzer stopped early without a crash
    return 0


if __name__ == "__main__":
    sys.exit(main())
