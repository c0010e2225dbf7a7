"""The math-verify worker process (run as a script, so it imports neither torch nor ablate).

Protocol: one JSON request per stdin line, `{"gold": str, "pred": str, "seconds": float}`; one
JSON reply per stdout line, `{"equal": bool}`, `{"timeout": true}` or `{"error": str}`, each with
`"cpu"`: the CPU seconds the request used.

The limit is on CPU time, not wall time: math-verify's own timeouts are `signal.alarm`, a
wall-clock alarm, so on a busy machine they fired on correct answers (`0.75` against `3/4` under a
load of 8-15: the reward depended on the load). Here a profiling timer (`ITIMER_PROF`, this
process's CPU time) stops a request that has used its seconds; the parent kills this process if
even that does not fire (sympy stuck in C code), also by CPU time.
"""

import json
import signal
import sys
import time


class CpuLimit(BaseException):
    """A request used its CPU seconds (a BaseException: math-verify's `except Exception` clauses
    must not swallow it into "no parse", a silent wrong answer)."""


def _on_cpu_limit(signum, frame):
    raise CpuLimit


def _uncapped(parse, verify, request: dict) -> dict:
    try:
        gold = parse("\\boxed{" + request["gold"] + "}", parsing_timeout=None, raise_on_error=True)
        if not gold:
            return {"error": "math-verify could not parse the reference answer"}
        pred = parse("\\boxed{" + request["pred"] + "}", parsing_timeout=None, raise_on_error=True)
        equal = bool(pred) and verify(gold, pred, timeout_seconds=None, raise_on_error=True)
        return {"equal": bool(equal)}
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}


def judge(parse, verify, request: dict) -> dict:
    """One request under a limit of `request["seconds"]` of this process's CPU time."""
    start = time.process_time()
    try:
        try:
            signal.setitimer(signal.ITIMER_PROF, max(float(request["seconds"]), 1e-3))
            reply = _uncapped(parse, verify, request)
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
    except CpuLimit:  # also when the timer fires inside the `finally` above
        reply = {"timeout": True}
    reply["cpu"] = time.process_time() - start
    return reply


def main() -> None:
    from math_verify import parse, verify

    signal.signal(signal.SIGPROF, _on_cpu_limit)
    # math-verify compiles its patterns on the first call: warm up before "ready", so that
    # start-up never counts against a request's seconds
    judge(parse, verify, {"gold": "\\frac{3}{4}", "pred": "0.75", "seconds": 60.0})
    sys.stdout.write(json.dumps({"ready": True}) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:
        reply = judge(parse, verify, json.loads(line))
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
