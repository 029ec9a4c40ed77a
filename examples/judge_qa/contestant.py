"""Two toy contestants for the judge_qa example, run by evalnb's ``command`` provider: the
prompt on stdin, the answer on stdout, the model's name in EVALNB_MODEL. Offline and
deterministic, so the example's grades can be checked by hand.

- ``careful`` answers what it knows (q1, q2, q3, q5, q8 right, q6 wrong) and says "I don't
  know" otherwise;
- ``bold`` answers everything, right for q1, q4, q7 and wrong for the rest.
"""

import os
import sys

KNOWS = {
    "careful": {"capital of France": "Paris", "legs does a spider": "eight", "closest to the Sun": "Mercury",
                "symbol of gold": "Au", "Berlin Wall": "1991", "sides does a hexagon": "6"},
    "bold": {"capital of France": "Paris, France", "legs does a spider": "6", "closest to the Sun": "Venus",
             "wrote the novel Frankenstein": "Mary Shelley", "symbol of gold": "Ag", "Berlin Wall": "1991",
             "largest ocean": "The Pacific", "sides does a hexagon": "8"},
}

model = os.environ.get("EVALNB_MODEL", "")
if model not in KNOWS:
    sys.exit(f"contestant.py: no model {model!r} ({', '.join(KNOWS)})")
question = sys.stdin.read().split("Question: ", 1)[-1]
sys.stdout.write(next((a for cue, a in KNOWS[model].items() if cue in question), "I don't know"))
