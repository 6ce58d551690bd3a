"""named: a question that names documents the collection holds (`nda_0003.txt`, a quoted title,
《劳动合同法》) is searched within them, the rest of the library after them when they hold fewer than
top_k chunks. rag_app/query/scope.py finds them; stages.retrieve applies the scope as a payload filter
to the whole search, so this lever has no step inside it."""
from __future__ import annotations

from rag_app.query.levers._contract import Lever


class Named(Lever, name="named", stage="outside", order=10):
    pass


LEVER = Named()
