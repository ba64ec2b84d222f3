#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# tl_summary.py FILE: a Trace Event Format file (JSON, gzipped or not) as
# one line per event, for the timeline tests to compare: it must parse
# as strict JSON (UTF-8), every "sf" must name a stack frame and every
# frame's parent another. Lines, sorted:
#   M PID TID NAME VALUE
#   X PID TID TS DUR NAME ARGS
#   i PID TID TS STACK ARGS      (STACK: frame names, root first, ";")
#   s|f PID TID TS ID
#   otherData KEY VALUE
import gzip
import json
import sys


def frames_of(frames, sf):
    names = []
    seen = set()
    while sf is not None:
        if sf in seen or sf not in frames:
            raise SystemExit("bad stack frame %r" % sf)
        seen.add(sf)
        names.append(frames[sf]["name"])
        sf = frames[sf].get("parent")
    return ";".join(reversed(names))


def main():
    raw = open(sys.argv[1], "rb").read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = json.loads(raw.decode("utf-8", "strict"),
                     parse_constant=lambda c: (_ for _ in ()).throw(
                         ValueError(c)))
    frames = doc.get("stackFrames", {})
    lines = []
    for ev in doc["traceEvents"]:
        ph = ev["ph"]
        args = json.dumps(ev.get("args", {}), sort_keys=True,
                          ensure_ascii=True)
        key = (ev["pid"], ev["tid"], ev.get("ts", 0), ph)
        if ph == "M":
            text = "M %d %d %s %s" % (ev["pid"], ev["tid"], ev["name"],
                                      ev["args"]["name"])
        elif ph == "X":
            text = "X %d %d %.3f %.3f %s %s" % (
                ev["pid"], ev["tid"], ev["ts"], ev["dur"], ev["name"], args)
        elif ph == "i":
            sf = ev.get("sf")
            stack = frames_of(frames, str(sf)) if sf is not None else "-"
            text = "i %d %d %.3f %s %s" % (ev["pid"], ev["tid"], ev["ts"],
                                           stack, args)
        elif ph in ("s", "f"):
            text = "%s %d %d %.3f %s%s" % (
                ph, ev["pid"], ev["tid"], ev["ts"], ev["id"],
                " bp=" + ev["bp"] if "bp" in ev else "")
        else:
            raise SystemExit("unexpected phase %r" % ph)
        lines.append((key, text))
    for sf in frames:
        frames_of(frames, sf)
    for key, text in sorted(lines, key=lambda kt: (kt[0], kt[1])):
        print(text)
    for k in sorted(doc.get("otherData", {})):
        if k != "producer":
            print("otherData %s %s" % (k, doc["otherData"][k]))


main()
