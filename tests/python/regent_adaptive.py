#!/usr/bin/env python3
"""A framework in another language: Dask's adaptive interface on regent's
/v1/ HTTP API, with the Python 3 standard library only (urllib, json).

Dask's adaptive core keeps *plan / requested / observed* and calls
``scale_up(n)`` and ``scale_down(names)``: this module maps them onto one
job group of a regent cluster (docs/api.md):

* ``Client``: every master's HTTP address; a request goes to the master
  that answered last and, on ``503`` (a standby, or a leader not ready) or a
  connection refused, reset or timed out, to the next one, round after
  round, until a bounded wait ends. Errors are ``ApiError`` with the
  status and the JSON body (``error``, ``field``).
* ``AdaptiveGroup``: ``create(spec)`` (``POST /v1/jobs``, with an
  idempotency key so a retried request never creates twice);
  ``scale_up(n)`` (``POST .../scale`` with a higher count);
  ``scale_down(names)`` (the count lowered by ``len(names)``, ``remove``
  naming exactly those executors, stopped with TERM within a deadline);
  ``observed()`` (``GET /v1/jobs/{id}``: the executors by phase).
* ``Watch``: a thread following ``GET /v1/events?after=INDEX``; when the
  stream ends (the leader died) it resumes after the last index it saw at
  whichever master leads now, and a ``gap`` line makes it re-list the job
  (``resync``) instead of trusting what it missed. Waiters wake on every
  event, gap or resync.

``main`` runs the scenario of runtime-smol/tests/e2e_python_adaptive.rs
and prints one machine-checkable line per step (``step NAME key=value
...``); it waits for a line on stdin at ``step await-failover`` (the test
kills the leader with ``kill -9``, then writes a line) and exits 0 with
``step ok``, or 1 with ``violation: <why>`` on stderr at the first broken
expectation.
"""

import argparse
import json
import os
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request


class ApiError(Exception):
    """A refused request: the HTTP status and the JSON body."""

    def __init__(self, status, body):
        self.status = status
        self.body = body if isinstance(body, dict) else {"error": str(body)}
        super().__init__(f"HTTP {status}: {self.body.get('error')}")


class Unreachable(Exception):
    """No master answered as the leader within the bounded wait."""


class Violation(Exception):
    """An expectation of the scenario does not hold."""


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


class Client:
    """Every master's HTTP base address (``http://HOST:PORT``); requests
    go to the leader, found by trying each in turn."""

    def __init__(self, masters, token=None, patience=60.0, timeout=15.0):
        self.masters = [m.rstrip("/") for m in masters]
        self.token = token
        self.patience = patience
        self.timeout = timeout
        self.current = 0
        self.lock = threading.Lock()

    def leader(self):
        with self.lock:
            return self.masters[self.current]

    def _next(self, tried):
        with self.lock:
            if self.masters[self.current] == tried:
                self.current = (self.current + 1) % len(self.masters)

    def open(self, method, path, body=None, headers=None, timeout=None):
        """The response of the leader (a file-like object, status 2xx);
        ``ApiError`` for any other status but 503; ``Unreachable`` when no
        master leads within the patience. Returns (response, retried)."""
        data = None
        hdrs = {"Accept": "application/json"}
        if body is not None:
            data = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        if self.token:
            hdrs["Authorization"] = f"Bearer {self.token}"
        hdrs.update(headers or {})
        deadline = time.monotonic() + self.patience
        attempts = 0
        last = "no attempt"
        while True:
            base = self.leader()
            attempts += 1
            req = urllib.request.Request(base + path, data=data, method=method, headers=hdrs)
            try:
                resp = urllib.request.urlopen(req, timeout=timeout or self.timeout)
                return resp, attempts > 1
            except urllib.error.HTTPError as e:
                raw = e.read()
                try:
                    payload = json.loads(raw or b"{}")
                except ValueError:
                    payload = {"error": raw.decode(errors="replace")}
                if e.code != 503:
                    raise ApiError(e.code, payload) from None
                last = f"{base}: 503 {payload.get('error')} (leader {payload.get('leader')})"
            except (urllib.error.URLError, ConnectionError, socket.timeout, OSError) as e:
                last = f"{base}: {getattr(e, 'reason', e)}"
            self._next(base)
            if time.monotonic() > deadline:
                raise Unreachable(f"no leader among {self.masters} within {self.patience}s: {last}")
            if attempts % len(self.masters) == 0:
                time.sleep(0.2)

    def call(self, method, path, body=None, headers=None):
        """One JSON request to the leader: (status, JSON body, retried)."""
        resp, retried = self.open(method, path, body, headers)
        with resp:
            raw = resp.read()
            return resp.status, json.loads(raw or b"{}"), retried


def quote(s):
    return urllib.parse.quote(s, safe="")


class AdaptiveGroup:
    """Dask's adaptive interface for one group of one job: ``plan`` and
    ``requested`` are the group's desired count, ``observed`` what runs."""

    def __init__(self, client, job, group):
        self.client = client
        self.job = job
        self.group = group

    def create(self, spec):
        """``POST /v1/jobs``: creates (or keeps) the job; the idempotency
        key makes a retried request answer ``replayed``, never create twice."""
        key = f"adaptive-{self.job}-{os.urandom(8).hex()}"
        body = dict(spec, id=self.job)
        _, answer, _ = self.client.call("POST", "/v1/jobs", body, {"Idempotency-Key": key})
        return answer

    def status(self):
        """The job's status (``GET /v1/jobs/{id}``)."""
        _, answer, _ = self.client.call("GET", f"/v1/jobs/{quote(self.job)}")
        return answer

    def group_status(self, status=None):
        status = status or self.status()
        for g in status.get("groups", []):
            if g.get("group") == self.group:
                return g
        raise Violation(f"job {self.job} has no group {self.group}: {status}")

    def requested(self):
        """The count asked for (Dask's ``requested``/``plan``)."""
        return self.group_status()["desired"]

    def observed(self, status=None):
        """The group's executors by phase: ``{"running": [ids], ...}``, and
        the slots, for the checks."""
        g = self.group_status(status)
        phases = {}
        for s in g.get("slots", []):
            phases.setdefault(s["phase"], []).append(s.get("executor"))
        return phases, g

    def _scale(self, body):
        path = f"/v1/jobs/{quote(self.job)}/groups/{quote(self.group)}/scale"
        try:
            _, answer, _ = self.client.call("POST", path, body)
            return answer
        except ApiError as e:
            # A write retried after a failover may have landed the first
            # time: the state says whether it holds.
            g = self.group_status()
            running = {s.get("executor") for s in g.get("slots", [])}
            if g["desired"] == body["count"] and not running & set(body.get("remove", [])):
                return {"count": body["count"], "removed": body.get("remove", []), "replayed": str(e)}
            raise

    def scale_up(self, n):
        """Dask's ``scale_up(n)``: ``n`` executors in all (never fewer)."""
        current = self.requested()
        if n <= current:
            return {"count": current}
        return self._scale({"count": n})

    def scale_down(self, names, deadline="20s"):
        """Dask's ``scale_down(workers)``: exactly the named executors go
        (TERM, then SIGKILL after ``deadline``), the count drops by as many."""
        names = list(names)
        count = self.requested() - len(names)
        if count < 0:
            raise Violation(f"cannot remove {len(names)} of {count + len(names)} executors")
        body = {"count": count, "remove": names, "drain": {"signal": "TERM", "deadline": deadline}}
        return self._scale(body)


class Watch(threading.Thread):
    """Follows ``/v1/events`` from whichever master leads, resuming after
    the last index seen; a gap line triggers a re-list (``resync``)."""

    def __init__(self, client, resync, heartbeat="1s"):
        super().__init__(daemon=True)
        self.client = client
        self.resync = resync
        self.heartbeat = heartbeat
        self.index = None
        self.events = 0
        self.gaps = 0
        self.streams = 0
        self.epochs = set()
        self.changed = threading.Condition()
        self.generation = 0
        self.stopping = False
        self.error = None

    def _bump(self):
        with self.changed:
            self.generation += 1
            self.changed.notify_all()

    def wait_change(self, seen, timeout):
        """Waits until something happened after generation ``seen`` (or
        ``timeout`` seconds); returns the generation now."""
        with self.changed:
            self.changed.wait_for(lambda: self.generation != seen, timeout)
            return self.generation

    def run(self):
        while not self.stopping:
            path = f"/v1/events?heartbeat={self.heartbeat}"
            if self.index is not None:
                path += f"&after={quote(self.index)}"
            try:
                # A dead leader: reset or EOF; a frozen one: the read timeout
                # (heartbeats come every second).
                resp, _ = self.client.open("GET", path, timeout=10)
            except Exception as e:  # noqa: BLE001 - reported, then retried
                self.error = f"events: {e}"
                time.sleep(0.5)
                continue
            self.streams += 1
            try:
                with resp:
                    for raw in resp:
                        if self.stopping:
                            return
                        self._line(raw)
            except Exception as e:  # noqa: BLE001 - the stream ended; resume
                log(f"events stream ended: {e}")
            # The stream ended (the leader went away): resume after the last
            # index at whichever master leads now.
            self._bump()

    def _line(self, raw):
        raw = raw.strip()
        if not raw:
            return
        line = json.loads(raw)
        if "index" in line:
            self.index = line["index"]
            self.epochs.add(line["index"].split(".")[0])
        if line.get("gap"):
            self.gaps += 1
            print(f"step watch-gap index={line.get('index')} resync={line.get('resync')}", flush=True)
            self.resync()
            self._bump()
        elif "event" in line:
            self.events += 1
            self._bump()


def executors_of_framework(client, job):
    """Every executor of the job the leader's ``/api/state`` lists, with its
    state (a cross-check that nothing runs twice); ``None`` when the master
    asked no longer leads."""
    _, state, _ = client.call("GET", "/api/state")
    if state.get("status") != "ALIVE":
        # A standby answers /api/state with its own view: not the leader's.
        return None
    return [
        (e["id"], e["state"])
        for e in state.get("executors", [])
        if e.get("framework_id") == job
    ]


# Slot phases of a group still changing (docs/api.md): a settled group has
# only running slots (and done ones: completed, failed, killed).
MOVING = ("waiting", "backoff", "launching", "stopping")


class Scenario:
    """The scenario of the module docs, step by step."""

    def __init__(self, args):
        self.client = Client(args.masters.split(","), token=args.token, patience=args.bound)
        self.bound = args.bound
        self.group = AdaptiveGroup(self.client, args.job, "workers")
        self.watch = Watch(self.client, resync=self._resync)
        self.resyncs = 0

    def _resync(self):
        # The gap line says events were missed: re-list instead of trusting
        # what we knew.
        self.resyncs += 1
        self.group.status()

    def until(self, what, check):
        """Waits (woken by the watch, at most a second between looks, at
        most ``bound`` in all) until ``check(status)`` returns a value."""
        deadline = time.monotonic() + self.bound
        seen = self.watch.generation
        last = None
        while True:
            status = self.group.status()
            try:
                got = check(status)
                if got is not None:
                    return got, status
            except Violation as v:
                last = str(v)
            if time.monotonic() > deadline:
                raise Violation(f"{what} not within {self.bound}s: {last or status}")
            seen = self.watch.wait_change(seen, 1.0)

    def running(self, n):
        """The ids of exactly ``n`` running executors, once the group wants
        ``n``, runs ``n`` and nothing is launching, stopping or waiting."""

        def check(status):
            phases, g = self.group.observed(status)
            ids = phases.get("running", [])
            moving = {p: e for p, e in phases.items() if p in MOVING}
            if g["desired"] != n or len(ids) != n or moving:
                raise Violation(f"desired {g['desired']}, phases {phases}")
            if len(set(ids)) != len(ids) or None in ids:
                raise Violation(f"an executor in two slots: {g['slots']}")
            return sorted(ids)

        return self.until(f"{n} executors running", check)[0]

    def no_doubles(self, expected):
        """The leader's own list settles on exactly ``expected`` live,
        nothing else launching or running for the job (an executor a scale
        removed is RUNNING until its worker reports its end; a doubled or
        relaunched one would stay, and the wait ends in a violation)."""
        deadline = time.monotonic() + self.bound
        while True:
            self.group.status()  # on the leader (the next master if need be)
            listed = executors_of_framework(self.client, self.group.job)
            live = sorted(i for i, s in listed or [] if s in ("RUNNING", "LAUNCHING"))
            if listed is not None and live == sorted(expected):
                return
            if time.monotonic() > deadline:
                raise Violation(f"live executors {live}, expected {sorted(expected)}")
            time.sleep(0.2)

    def run(self):
        first = self.client.leader()
        spec = {
            "name": self.group.job,
            "group": [
                {
                    "name": "workers",
                    "count": 4,
                    "command": ["sleep", "100000"],
                    "cores": 1,
                    "memory_mb": 16,
                }
            ],
        }
        created = self.group.create(spec)
        print(
            f"step created job={created.get('job')} version={created.get('version')} "
            f"change={created.get('change')} leader={self.client.leader()} first={first}",
            flush=True,
        )
        if created.get("change") not in ("created", "unchanged", "replayed"):
            raise Violation(f"create answered {created}")
        self.watch.start()

        four = self.running(4)
        print(f"step running count=4 ids={','.join(four)}", flush=True)
        self.no_doubles(four)

        self.group.scale_up(6)
        six = self.running(6)
        if not set(four) <= set(six):
            raise Violation(f"scale up replaced executors: {four} -> {six}")
        print(f"step scaled-up count=6 ids={','.join(six)}", flush=True)

        # Remove two named executors: one of the first four and one of the
        # new ones, so the choice is not the master's default (the last).
        added = sorted(set(six) - set(four))
        remove = [four[0], added[0]]
        self.group.scale_down(remove)
        kept = sorted(set(six) - set(remove))
        after = self.running(4)
        if after != kept:
            raise Violation(f"scale down removed {sorted(set(six) - set(after))}, asked {remove}")
        self.no_doubles(kept)
        print(f"step scaled-down removed={','.join(remove)} kept={','.join(kept)}", flush=True)

        old_leader = self.client.leader()
        print(f"step await-failover leader={old_leader} index={self.watch.index}", flush=True)
        if not sys.stdin.readline():
            raise Violation("stdin closed before the failover was signalled")
        streams = self.watch.streams

        # The next leader: the same four executors, none relaunched.
        again = self.running(4)
        new_leader = self.client.leader()
        if again != kept:
            raise Violation(f"after the failover {again}, before {kept}")
        self.no_doubles(kept)
        print(f"step failover old={old_leader} new={new_leader} same={','.join(again)}", flush=True)
        if new_leader == old_leader:
            raise Violation(f"the killed master {old_leader} still answers as the leader")

        last = [kept[-1]]
        self.group.scale_down(last)
        final = self.running(3)
        if final != sorted(set(kept) - set(last)):
            raise Violation(f"after removing {last}: {final}, from {kept}")
        self.no_doubles(final)
        print(f"step scaled-down-after-failover removed={last[0]} kept={','.join(final)}", flush=True)

        # The watch followed the new leader: resumed (a new stream) and saw
        # the new leadership's indexes.
        deadline = time.monotonic() + self.bound
        while self.watch.streams <= streams or len(self.watch.epochs) < 2:
            if time.monotonic() > deadline:
                raise Violation(
                    f"the event stream did not resume at the new leader "
                    f"(streams {self.watch.streams}, epochs {sorted(self.watch.epochs)})"
                )
            time.sleep(0.2)
        print(
            f"step watch events={self.watch.events} gaps={self.watch.gaps} "
            f"resyncs={self.resyncs} streams={self.watch.streams} index={self.watch.index}",
            flush=True,
        )
        self.watch.stopping = True
        print("step ok", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--masters", required=True, help="http://HOST:PORT,... (every master)")
    p.add_argument("--job", default="adaptive")
    p.add_argument("--token", default=os.environ.get("REGENT_TOKEN"))
    p.add_argument("--bound", type=float, default=90.0, help="seconds any one wait may take")
    args = p.parse_args(argv)
    try:
        Scenario(args).run()
    except (Violation, ApiError, Unreachable) as e:
        print(f"violation: {e}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
