#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# timeline_check.py FILE PROGRAM_LOG [--only ENDPOINT]: checks the
# timeline.json.gz plabel record --timeline wrote of tests/e2e/progs/
# phases.c, whose output (PROGRAM_LOG) names each thread's tid. Prints
# one "ok DESC" or "not ok DESC: WHY" line per check. With --only, the
# file was recorded with --timeline-label endpoint=ENDPOINT: only that
# thread's track may be there.
import gzip
import json
import re
import sys


def report(ok, desc, why=""):
    print("ok %s" % desc if ok else "not ok %s: %s" % (desc, why))


def stack_names(frames, sf):
    names = []
    sf = str(sf)
    while sf in frames:
        names.append(frames[sf]["name"])
        sf = frames[sf].get("parent")
        if sf is None:
            break
    return names


def main():
    path, log = sys.argv[1], sys.argv[2]
    only = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--only" \
        else None
    tids = {}
    for line in open(log, encoding="utf-8", errors="replace"):
        m = re.search(r"thread (\S+) tid=(\d+)", line)
        if m:
            tids[m.group(1)] = int(m.group(2))
    report(len(tids) == 3, "the program named its 3 threads", repr(tids))
    try:
        doc = json.loads(gzip.open(path).read().decode("utf-8", "strict"))
    except (OSError, ValueError) as e:
        report(False, "the file is gzipped strict JSON", str(e))
        return
    report(True, "the file is gzipped strict JSON")
    evs = doc.get("traceEvents", [])
    frames = doc.get("stackFrames", {})
    other = doc.get("otherData", {})
    report(other.get("dropped_observations") == "0",
           "no observation dropped", repr(other))
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in evs
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    pnames = {e["pid"]: e["args"]["name"] for e in evs
              if e.get("ph") == "M" and e.get("name") == "process_name"}
    by_tid = {}
    for e in evs:
        by_tid.setdefault(e.get("tid"), []).append(e)

    expect = {"api-search": "/api/search", "api-upload": "/api/upload",
              "janitor": None}
    for name, ep in expect.items():
        tid = tids.get(name)
        want = only is None or ep == only
        track = [k for k, v in names.items() if k[1] == tid]
        if not want:
            report(not track and tid not in by_tid,
                   "%s: no track (not labeled %s)" % (name, only),
                   repr(track))
            continue
        report(len(track) == 1 and names[track[0]] == name,
               "%s: a track named after the thread" % name, repr(track))
        if not track:
            continue
        pid = track[0][0]
        report(pnames.get(pid) == "phases",
               "%s: its process is named phases" % name, repr(pnames))
        mine = by_tid.get(tid, [])
        xs = sorted((e for e in mine if e["ph"] == "X"),
                    key=lambda e: e["ts"])
        flat = all(a["ts"] + a["dur"] <= b["ts"] + 1e-3
                   for a, b in zip(xs, xs[1:]))
        report(bool(xs) and flat and xs[0]["ts"] >= 0,
               "%s: slices from time 0 on, none overlapping" % name,
               repr([(e["ts"], e["dur"]) for e in xs[:6]]))
        on = [e for e in xs if e["name"].startswith("on-CPU")]
        off = [e for e in xs if e["name"].startswith("off-CPU (sleep)")]
        report(len(off) >= 2, "%s: off-CPU (sleep) slices" % name,
               "%d" % len(off))
        samples = [e for e in mine if e["ph"] == "i"]
        report(len(samples) >= 5, "%s: CPU samples as instant events"
               % name, "%d" % len(samples))
        # (some are in thread start and exit, in libc)
        burn = [e for e in samples
                if "phases_burn" in stack_names(frames, e.get("sf"))]
        report(burn and 3 * len(burn) >= len(samples),
               "%s: samples' stacks are symbolized (phases_burn)" % name,
               "%d of %d" % (len(burn), len(samples)))
        if ep is None:
            report(all(e["args"] == {} for e in on + samples),
                   "%s: its slices carry no labels" % name, "")
            continue
        phases = [e["args"].get("phase") for e in on
                  if e["args"].get("endpoint") == ep]
        changes = sum(1 for a, b in zip(phases, phases[1:]) if a != b)
        report("parse" in phases and "render" in phases and changes >= 3,
               "%s: on-CPU slices split where phase changes" % name,
               repr(phases))
        # the work it does under its labels carries them (its start, in
        # the library's first plabel_set(), and its exit have none)
        work = [e["args"] for e in burn]
        other = [e["args"] for e in samples
                 if e["args"] and e["args"].get("endpoint") != ep]
        report(len(work) >= 5 and not other and
               all(a.get("endpoint") == ep for a in work),
               "%s: samples carry the thread's labels" % name,
               "%d samples in phases_burn: %r; others: %r" % (
                   len(work), work[:3], other[:3]))
        # the flow from the creating (main) thread to this one
        fs = [e for e in mine if e["ph"] == "f"]
        ss = {e["id"]: e for e in evs if e["ph"] == "s"}
        if only is None:
            ok = len(fs) == 1 and fs[0]["id"] in ss and \
                ss[fs[0]["id"]]["tid"] == pid
            report(ok, "%s: a flow from the main thread's creation" % name,
                   repr(fs))
        else:
            # the main thread is left out: no flow may dangle
            report(all(f["id"] in ss for f in fs),
                   "%s: no flow from a track left out" % name, repr(fs))


main()
