"""A toy grader for the judge_qa example, run by evalnb's ``command`` provider in place of a
grader LLM (the parameters mark it ``approximation: true``, so the outputs say so). It reads
the gold and predicted answers from the grading prompt and replies with one grade: CORRECT when
the prediction holds the gold answer (or the number's word), NOT_ATTEMPTED for "I don't know",
INCORRECT otherwise.
"""

import re
import sys

WORDS = {"6": "six", "8": "eight"}

prompt = sys.stdin.read()
gold = re.search(r"^Gold answer: (.*)$", prompt, re.M)[1].strip().lower()
predicted = re.search(r"^Predicted answer: (.*)$", prompt, re.M)[1].strip().lower()
words = set(re.findall(r"\w+", predicted))
if "know" in words and "don" in words:
    grade = "NOT_ATTEMPTED"
elif all(w in words for w in re.findall(r"\w+", gold.removesuffix(" ocean"))) or WORDS.get(gold) in words:
    grade = "CORRECT"
else:
    grade = "INCORRECT"
sys.stdout.write(grade)
