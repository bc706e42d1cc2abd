#!/usr/bin/env python3
"""Throughput / latency driver for a Workflows engine behind the HTTP API of bench/wrangler/worker.

Creates N instances of the BENCH workflow (K trivial step.do calls each) with
C concurrent create requests, polls until every instance is complete, and
prints instances/s, steps/s and create->complete latency percentiles.

    python3 bench_drive.py --base http://127.0.0.1:8787 -n 200 -k 10 -c 20

HTTP API used (bench/wrangler/worker implements it; another engine only has
to expose the same endpoints to be measured with this same driver):
    POST /create?wf=BENCH&id=ID   body {"steps": K}   -> 200 {"id": ID}
    GET  /status?wf=BENCH&id=ID                       -> 200 {"status": "...", "output": {...}}
    POST /statuses?wf=BENCH       body [ID, ...]      -> 200 {ID: {"status": "...", "output": ...}, ...}
                                                         (only with --batch-status)

Modes:
  open (default): C threads create all N instances as fast as they can; while
          that goes on, --pollers threads poll each created instance with
          GET /status at most every --poll-interval s (or, with --batch-status,
          one thread polls all pending ids with POST /statuses).
  --closed: C threads each create one instance, poll it until it completes,
          then take the next one (at most C instances in flight).

Latency is measured two ways:
  poll  : from just before the create request is sent until the first status
          poll that sees "complete" (includes up to --poll-interval of slack);
  engine: from the same start to output.finished_at (ms epoch, written by the
          workflow after its last step), if the output has it.
Throughput = N / (last completion seen - first create sent).

stdlib only. Talks only to a loopback base URL; every loop is bounded by
--timeout seconds and by a request budget; exits by itself.
"""
import argparse
import heapq
import http.client
import ipaddress
import json
import math
import os
import sys
import threading
import time
import urllib.parse


def pct(values, p):
    """Nearest-rank percentile (None when there are no values)."""
    if not values:
        return None
    xs = sorted(values)
    k = max(0, min(len(xs) - 1, math.ceil(p / 100.0 * len(xs)) - 1))
    return xs[k]


def loopback_only(base):
    u = urllib.parse.urlsplit(base)
    host = u.hostname or ""
    if host == "localhost":
        return u
    try:
        if ipaddress.ip_address(host).is_loopback:
            return u
    except ValueError:
        pass
    sys.exit(f"refusing non-loopback base URL {base!r} (only 127.0.0.0/8, ::1, localhost)")


def group_cpu_seconds(pgid):
    """utime+stime (s) summed over live processes in process group pgid."""
    if not pgid:
        return None
    tck = os.sysconf("SC_CLK_TCK")
    total = 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                st = f.read()
        except OSError:
            continue
        rest = st[st.rfind(")") + 2:].split()
        # rest[0]=state, [2]=pgrp, [11]=utime, [12]=stime (fields 3,5,14,15 of stat)
        if int(rest[2]) == pgid:
            total += int(rest[11]) + int(rest[12])
    return total / tck


def rnd(x, nd=3):
    return None if x is None else round(x, nd)


class Client:
    """One keep-alive HTTP/1.1 connection per thread."""

    def __init__(self, u, timeout):
        self.host, self.port, self.timeout = u.hostname, u.port or 80, timeout
        self.conn = None

    def request(self, method, path, body=None):
        data = None if body is None else json.dumps(body).encode()
        headers = {"content-type": "application/json"} if data is not None else {}
        for attempt in (1, 2):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
                self.conn.request(method, path, body=data, headers=headers)
                r = self.conn.getresponse()
                raw = r.read()
                try:
                    return r.status, json.loads(raw or b"null")
                except ValueError:
                    return r.status, {"raw": raw[:200].decode("utf-8", "replace")}
            except (http.client.HTTPException, OSError) as e:
                if self.conn is not None:
                    self.conn.close()
                self.conn = None
                if attempt == 2:
                    return 0, {"error": {"name": type(e).__name__, "message": str(e)}}
        return 0, None


class Bench:
    def __init__(self, a):
        self.a = a
        self.u = loopback_only(a.base)
        self.n, self.k = a.n, a.k
        self.prefix = a.prefix or f"bench-{int(time.time() * 1000)}"
        self.ids = [f"{self.prefix}-{i}" for i in range(self.n)]
        self.t_start = [None] * self.n
        self.t_created = [None] * self.n
        self.t_done = [None] * self.n
        self.finished_at = [None] * self.n
        self.final = [None] * self.n
        self.remaining = self.n
        self.failures = []
        self.requests = 0
        self.polls = 0
        self.max_requests = a.max_requests or (self.n * 20000)
        self.heap = []
        self.next_create = 0
        self.cv = threading.Condition()
        self.deadline = time.monotonic() + a.timeout
        self.stop = False
        self.local = threading.local()

    # -- helpers ---------------------------------------------------------
    def client(self):
        c = getattr(self.local, "c", None)
        if c is None:
            c = self.local.c = Client(self.u, timeout=min(60.0, self.a.timeout))
        return c

    def path(self, ep, **q):
        q = {"wf": self.a.wf, **q}
        return f"{ep}?{urllib.parse.urlencode(q)}"

    def count_request(self):
        with self.cv:
            self.requests += 1
            if self.requests > self.max_requests:
                self.stop = True
                self.cv.notify_all()
                return False
            return True

    def push(self, when, kind, i):
        with self.cv:
            heapq.heappush(self.heap, (when, kind, i))
            self.cv.notify()

    def finish(self, i, ok, info=None):
        with self.cv:
            if self.final[i] is not None:
                return
            self.final[i] = "complete" if ok else "failed"
            if not ok:
                self.failures.append((self.ids[i], info))
            self.remaining -= 1
            if self.remaining == 0:
                self.stop = True
                self.cv.notify_all()

    def take_poll_result(self, i, st, now):
        status = st.get("status") if isinstance(st, dict) else st
        if status == "complete":
            self.t_done[i] = now
            out = st.get("output") if isinstance(st, dict) else None
            if isinstance(out, dict) and isinstance(out.get("finished_at"), (int, float)):
                self.finished_at[i] = out["finished_at"] / 1000.0
            self.finish(i, True)
            return True
        if status in ("errored", "terminated", "unknown"):
            self.finish(i, False, st)
            return True
        return False

    # -- threads -------------------------------------------------------------
    def alive(self):
        return not self.stop and time.monotonic() < self.deadline

    def next_index(self):
        with self.cv:
            if self.next_create >= self.n:
                return None
            i = self.next_create
            self.next_create += 1
            return i

    def do_create(self, c, i):
        self.t_start[i] = time.time()
        code, body = c.request("POST", self.path("/create", id=self.ids[i]), {"steps": self.k})
        self.t_created[i] = time.time()
        if code != 200:
            self.finish(i, False, {"create": code, "body": body})
            return False
        return True

    def do_poll(self, c, i):
        code, st = c.request("GET", self.path("/status", id=self.ids[i]))
        now = time.time()
        with self.cv:
            self.polls += 1
        return code == 200 and self.take_poll_result(i, st, now)

    def creator(self):
        """open mode: create instances as fast as C threads allow."""
        c = self.client()
        while self.alive():
            i = self.next_index()
            if i is None:
                return
            if not self.count_request():
                return
            if self.do_create(c, i) and not self.a.batch_status:
                self.push(time.monotonic() + self.a.poll_interval, "poll", i)

    def poller(self):
        """open mode: poll due instances (GET /status), each at most every poll_interval."""
        c = self.client()
        while True:
            with self.cv:
                while True:
                    if not self.alive():
                        self.stop = True
                        self.cv.notify_all()
                        return
                    if self.heap and self.heap[0][0] <= time.monotonic():
                        _, _, i = heapq.heappop(self.heap)
                        break
                    wait = (self.heap[0][0] - time.monotonic()) if self.heap else 0.05
                    self.cv.wait(max(0.0005, min(wait, 0.05)))
            if not self.count_request():
                return
            if not self.do_poll(c, i):
                self.push(time.monotonic() + self.a.poll_interval, "poll", i)

    def closed_worker(self):
        """closed mode: create one instance, poll it to completion, repeat."""
        c = self.client()
        while self.alive():
            i = self.next_index()
            if i is None:
                return
            if not self.count_request() or not self.do_create(c, i):
                continue
            while self.alive():
                time.sleep(self.a.poll_interval)
                if not self.count_request() or self.do_poll(c, i):
                    break

    def batch_poller(self):
        c = Client(self.u, timeout=min(60.0, self.a.timeout))
        while self.alive():
            t0 = time.monotonic()
            pending = [i for i in range(self.n) if self.t_created[i] is not None and self.final[i] is None]
            for j in range(0, len(pending), 100):
                chunk = pending[j:j + 100]
                if not self.count_request():
                    return
                code, res = c.request("POST", self.path("/statuses"), [self.ids[i] for i in chunk])
                now = time.time()
                with self.cv:
                    self.polls += len(chunk)
                if code == 200 and isinstance(res, dict):
                    for i in chunk:
                        st = res.get(self.ids[i])
                        if isinstance(st, dict) and "status" in st:
                            self.take_poll_result(i, st, now)
            time.sleep(max(0.0, self.a.poll_interval - (time.monotonic() - t0)))

    # -- run -----------------------------------------------------------------
    def warmup(self):
        c = Client(self.u, timeout=60)
        wid = f"{self.prefix}-warmup"
        code, body = c.request("POST", self.path("/create", id=wid), {"steps": self.k})
        if code != 200:
            sys.exit(f"warmup create failed: HTTP {code} {body}")
        end = time.monotonic() + min(120, self.a.timeout)
        while time.monotonic() < end:
            code, st = c.request("GET", self.path("/status", id=wid))
            if code == 200 and st.get("status") in ("complete", "errored", "terminated"):
                if st["status"] != "complete":
                    sys.exit(f"warmup instance ended {st}")
                return
            time.sleep(0.1)
        sys.exit("warmup instance did not complete in time")

    def run(self):
        if self.a.warmup:
            self.warmup()
        self.deadline = time.monotonic() + self.a.timeout
        cpu0 = group_cpu_seconds(self.a.server_pgid)
        if self.a.closed:
            threads = [threading.Thread(target=self.closed_worker, daemon=True) for _ in range(self.a.c)]
        else:
            threads = [threading.Thread(target=self.creator, daemon=True) for _ in range(self.a.c)]
            if self.a.batch_status:
                threads.append(threading.Thread(target=self.batch_poller, daemon=True))
            else:
                threads += [threading.Thread(target=self.poller, daemon=True) for _ in range(self.a.pollers)]
        wall0 = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=max(1.0, self.deadline - time.monotonic() + 5))
        wall1 = time.time()
        cpu1 = group_cpu_seconds(self.a.server_pgid)
        return self.report(wall0, wall1, cpu0, cpu1)

    def report(self, wall0, wall1, cpu0, cpu1):
        done = [i for i in range(self.n) if self.final[i] == "complete"]
        starts = [t for t in self.t_start if t is not None]
        first = min(starts) if starts else wall0
        last = max((self.t_done[i] for i in done), default=wall1)
        span = max(1e-9, last - first)
        lat_poll = [self.t_done[i] - self.t_start[i] for i in done]
        lat_eng = [self.finished_at[i] - self.t_start[i] for i in done if self.finished_at[i] is not None]
        create_lat = [self.t_created[i] - self.t_start[i] for i in range(self.n) if self.t_created[i] and self.t_start[i]]
        create_span = (max(self.t_created[i] for i in range(self.n) if self.t_created[i]) - first) if create_lat else None
        r = {
            "base": self.a.base, "wf": self.a.wf, "n": self.n, "k": self.k, "c": self.a.c,
            "mode": "closed" if self.a.closed else ("open+batch-status" if self.a.batch_status else f"open+{self.a.pollers}-pollers"),
            "poll_interval_s": self.a.poll_interval,
            "completed": len(done), "failed": len(self.failures),
            "timed_out": len(done) + len(self.failures) < self.n,
            "wall_s": round(span, 3),
            "instances_per_s": round(len(done) / span, 2),
            "steps_per_s": round(len(done) * self.k / span, 1),
            "latency_poll_s": {"p50": rnd(pct(lat_poll, 50)), "p99": rnd(pct(lat_poll, 99)),
                               "max": round(max(lat_poll), 3) if lat_poll else None},
            "latency_engine_s": {"p50": rnd(pct(lat_eng, 50)), "p99": rnd(pct(lat_eng, 99)),
                                 "max": round(max(lat_eng), 3) if lat_eng else None},
            "create_request_s": {"p50": rnd(pct(create_lat, 50), 4), "p99": rnd(pct(create_lat, 99), 4)},
            "all_created_after_s": rnd(create_span),
            "requests": self.requests, "status_polls": self.polls,
        }
        if cpu0 is not None and cpu1 is not None:
            r["server_cpu_s"] = round(cpu1 - cpu0, 2)
            r["server_cpu_ms_per_step"] = round(1000 * (cpu1 - cpu0) / max(1, len(done) * self.k), 3)
        if self.failures:
            r["first_failures"] = self.failures[:3]
        return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", default="http://127.0.0.1:8787")
    ap.add_argument("-n", type=int, default=200, help="instances")
    ap.add_argument("-k", type=int, default=10, help="steps per instance")
    ap.add_argument("-c", type=int, default=20, help="concurrent create requests (open mode) / instances in flight (--closed)")
    ap.add_argument("--pollers", type=int, default=4, help="open mode: threads polling GET /status")
    ap.add_argument("--closed", action="store_true", help="closed loop: each of C threads creates one instance, polls it to completion, repeats")
    ap.add_argument("--wf", default="BENCH", help="binding name passed as ?wf=")
    ap.add_argument("--poll-interval", type=float, default=0.1, help="s between polls of one instance")
    ap.add_argument("--batch-status", action="store_true", help="open mode: poll with POST /statuses (one thread, <=100 ids a request) instead of GET /status")
    ap.add_argument("--timeout", type=float, default=600.0, help="overall bound in seconds")
    ap.add_argument("--max-requests", type=int, default=0, help="request budget (default 20000*N)")
    ap.add_argument("--prefix", default="", help="instance id prefix (default bench-<ms>)")
    ap.add_argument("--no-warmup", dest="warmup", action="store_false")
    ap.add_argument("--server-pgid", type=int, default=0, help="process group of the server, to report its CPU seconds")
    ap.add_argument("--json", action="store_true", help="print only the JSON result")
    a = ap.parse_args()
    if a.n < 1 or a.k < 0 or a.c < 1:
        sys.exit("need n>=1, k>=0, c>=1")
    r = Bench(a).run()
    if not a.json:
        print(f"[{r['mode']}] n={r['n']} k={r['k']} c={r['c']} completed={r['completed']} failed={r['failed']} "
              f"wall={r['wall_s']}s  {r['instances_per_s']} inst/s  {r['steps_per_s']} steps/s  "
              f"latency(poll) p50={r['latency_poll_s']['p50']}s p99={r['latency_poll_s']['p99']}s  "
              f"latency(engine) p50={r['latency_engine_s']['p50']}s p99={r['latency_engine_s']['p99']}s"
              + (f"  server_cpu={r['server_cpu_s']}s" if "server_cpu_s" in r else ""))
    print(json.dumps(r))
    sys.exit(0 if r["completed"] == r["n"] else 1)


if __name__ == "__main__":
    main()
