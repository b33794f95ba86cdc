"""Why a gang placement's search found nothing: the first pod no node can take
alone (what each named node has free for it), or that the pods do not fit
together. Texts are kept in the search's memo while nothing they name changes.

Pure: no clock, no randomness, no I/O.
"""

from __future__ import annotations

from kuota.core.dra.placement_reasons import free_for, free_text, named_nodes, node_free
from kuota.core.dra.placement_search import Search

__all__ = ["why"]


def why(search: Search) -> str:
    """Why ``search`` found no placement (and did not run out of budget): the
    first pod that fits on no node alone (its prefiltered nodes are none), else
    that they do not fit together."""
    pods = search.pods
    for i in range(len(pods)):
        if not search.allowed[i]:
            return f"no node can take pod {i + 1} of {len(pods)}: {_free(search, i)}"
    free = _free(search, 0)
    return f"each pod fits alone but the {len(pods)} pods cannot be placed together; pod 1: {free}"


def _free(search: Search, i: int) -> str:
    """:func:`free_for` for pod ``i``, from the search's memo: the same text while
    nothing was touched, else only the named nodes touched since asked again."""
    pod, nodes, memo = search.pods[i], search.nodes, search.memo
    candidates, attrs = search.candidates[i], search.attrs[i]
    limits, used, taken = search.limits, search.base_used, search.base
    if memo is None:
        return free_for(pod, nodes, candidates, limits, used, taken, attrs)
    key = search.tokens[i]
    last = memo.texts.get(key)
    if last is not None and last[0] == memo.clock and last[1] is pod.nodes and last[2] is nodes:
        return last[3]
    named = memo.named.get(key)
    if named is None or named[0] is not pod.nodes or named[1] is not nodes:
        named = (pod.nodes, nodes, named_nodes(pod, nodes, candidates))
        memo.named[key] = named
    needs, names, more, bare = named[2]
    parts = memo.parts.get(key)
    if parts is None:
        parts = memo.parts[key] = {}
    texts: list[str] = []
    for node in names:
        version = memo.versions.get(node, 0)
        known = parts.get(node)
        if known is None or known[0] != version:
            known = parts[node] = (
                version,
                node_free(pod, node, candidates, limits, used, taken, attrs),
            )
        texts.append(known[1])
    text = free_text(needs, texts, more, bare)
    memo.texts[key] = (memo.clock, pod.nodes, nodes, text)
    return text
