"""Counterfactual copies of public tasks: the held-out evidence a harness cannot know in advance.

BFCL and HumanEval are public, and a capable proposer has read them: a harness can carry a
table keyed on a task's surface (a hash of its question, its function's name) that says
which question word fills which parameter, or the call itself. Held-out tasks (and, so that
nothing tells the splits apart, dev tasks) are therefore not the public tasks but copies
rewritten per installation from its secret, changing every surface such a table can key on
while keeping what the task asks:

* BFCL (:mod:`.bfcl`): the numbers in the question that the answer holds and, where a
  parameter must take a string the question writes, that string (swapped with a value the
  same parameter, or one of its kind, takes in another task); function and parameter names
  (a plain synonym for a function's verb or a neutral suffix: the words and their sense
  stay), consistently in the tools, the question and the possible answers; the order of
  the tools and of each tool's parameters. The possible answers are rewritten with them, so
  BFCL's checker judges the copy as it judges the original.
* HumanEval (:mod:`.humaneval`): the entry point's name, in the prompt, the canonical
  solution and the hidden tests alike.

Names come from :mod:`.names`, numbers from :mod:`.numbers`. A copy is a pure function of
(task, seed): the parent and the candidate see the same copy, and the same installation
sees the same copies across restarts.

Owns: the rewrite rules and the copies' ground truth.

May import: the standard library only (the suites call it with their own data).
"""
