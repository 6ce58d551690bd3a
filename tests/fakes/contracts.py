"""Small English NDAs written for the tests: the same clauses in every one (as in real NDA packs), told
apart only by their parties and one clause each, so unscoped retrieval can land in the wrong one."""
from __future__ import annotations

from pathlib import Path

NDA = """{title}
This Agreement is entered into as of {date} between {a} ("Disclosing Party") and {b} ("Receiving Party").
WHEREAS:
A. The parties wish to explore a business relationship; and
B. The Disclosing Party is willing to disclose Confidential Information on the terms below.
NOW, THEREFORE, the parties hereby agree as follows:
1. DEFINITIONS
1.1 "Confidential Information" means all information disclosed by the Disclosing Party, whether
oral or written, that is marked confidential.
1.2 "Affiliate" means any entity controlling or controlled by a party.
2. OBLIGATIONS
2.1 The Receiving Party shall hold the Confidential Information in strict confidence.
2.2 The Receiving Party may disclose Confidential Information only:
(a) to its employees who need to know it;
(b) {affiliates};
(c) as required by law, after notice to the Disclosing Party.
3. TERM
3.1 This Agreement remains in force for {years} years from the date above.
IN WITNESS WHEREOF the parties have signed this Agreement.
"""

NDAS = {
    "acme_nda.txt": dict(title="MUTUAL NON-DISCLOSURE AGREEMENT", date="1 May 2020", a="Acme Corp", b="Beta LLC",
                         affiliates="to its Affiliates, who are bound by the same obligations", years="three"),
    "globex_nda.txt": dict(title="NON-DISCLOSURE AGREEMENT", date="2 June 2021", a="Globex Inc", b="Delta Ltd",
                           affiliates="to no Affiliate without prior written consent of the Disclosing Party",
                           years="five"),
    "initech_nda.txt": dict(title="NON-DISCLOSURE AGREEMENT", date="3 July 2022", a="Initech", b="Omega plc",
                            affiliates="to its professional advisers under a duty of confidence", years="two"),
}


def nda_text(name: str) -> str:
    return NDA.format(**NDAS[name])


def write_ndas(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in NDAS:
        (folder / name).write_text(nda_text(name), encoding="utf-8")
    return folder
