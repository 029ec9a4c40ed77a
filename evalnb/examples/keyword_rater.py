#!/usr/bin/env python3
"""EXAMPLE ONLY: a small deterministic stand-in for an LLM autorater, for offline demos.

evalnb's `command` provider runs it with the rating prompt on stdin. It rates the
trajectory's final response by how many of the reference's content words and numbers it
contains: 2 for at least 60 %, 1 for at least 25 %, else 0; and replies in the autorater's
JSON shape. It reads nothing but its input; its ratings are not an LLM's and are not
comparable with the report's.
"""

import json
import re
import sys

STOP = set("the a an and or of to in on at for by with from is are was were be this that it its as "
           "than within into about which what".split())


def words(text: str) -> set[str]:
    tokens = re.findall(r"\d+(?:\.\d+)?|[a-z]{3,}", text.lower())
    return {t for t in tokens if t not in STOP}


def section(prompt: str, start: str, end: str | None) -> str:
    head = prompt.find(start)
    if head < 0:
        return ""
    head += len(start)
    tail = prompt.find(end, head) if end else -1
    return prompt[head:tail if tail >= 0 else None]


def main() -> None:
    prompt = sys.stdin.read()
    reference = words(section(prompt, "REFERENCE:\n", "\n\nAGENT TRAJECTORY:"))
    final = words(section(prompt, "Final response:\n", "\n\nReply only with JSON"))
    share = len(reference & final) / len(reference) if reference else 0.0
    rating = 2 if share >= 0.6 else 1 if share >= 0.25 else 0
    print(json.dumps({"rating": rating, "justification": f"{share:.0%} of the reference's key terms"}))


if __name__ == "__main__":
    main()
