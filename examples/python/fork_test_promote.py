#!/usr/bin/env python3
"""Fork into 3, test each, promote the winner.

A session holds a small project with a failing test. Three candidate fixes
run in three fork children; the test runs in each; the child whose fix
passes (the fastest, when several do) has its changes promoted back to
the parent, and the others are deleted. Needs PADDOCK_URL, PADDOCK_TOKEN
(an admin's or tenant's: promote is not open to session tokens) and, for a
gateway's own CA, PADDOCK_CA. Prints the winner and exits 0 when the
parent passes its test at the end.
"""
import sys

import paddock

TEST = "sh /workspace/test.sh"

CANDIDATES = [
    "echo 'add() { echo $(($1 - $2)); }' > /workspace/add.sh",  # wrong
    "echo 'add() { echo $(($1 + $2)); }' > /workspace/add.sh",  # right
    "echo 'add() { echo 5; }' > /workspace/add.sh",  # right for one case only
]


def main() -> int:
    px = paddock.Paddock()
    with px.create_session(agent="fork-test-promote") as s:
        s.files.write("/workspace/add.sh", "add() { echo 0; }\n")
        s.files.write("/workspace/test.sh",
                      ". /workspace/add.sh\n[ \"$(add 2 3)\" = 5 ] && [ \"$(add 10 1)\" = 11 ]\n")
        if s.exec(TEST).exit_code == 0:
            print("the test passes already")
            return 1
        res = s.evaluate(CANDIDATES, test=TEST)
        for r in res["results"]:
            print(f"candidate {r['index']}: score {r['score']} ({r['command']})")
        if res["winner"] < 0:
            print("no candidate passed")
            return 1
        winner = px.session(res["winner_session"])
        with winner:
            out = winner.promote()
            print(f"winner: candidate {res['winner']}; promoted {out['applied']}")
        final = s.exec(TEST)
        print("parent's test after promote:", "pass" if final.exit_code == 0 else "fail")
        return 0 if final.exit_code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
