"""YAML from a user, read within bounds: profiles, benchmark files and `--config` values.

PyYAML composes an alias as a second reference to the same node, so a file of nine nested
levels of ten aliases each (a "billion laughs" document, a few hundred bytes) loads in a
millisecond, and then every walk over it (validation, merging, `drmas config show`) visits
10^9 elements and runs until killed. Here a document is composed first and its size counted
as the walks will see it, aliases expanded (with a memo, so the count itself is linear in the
nodes written); a document over `MAX_NODES` expanded nodes, or text over `MAX_BYTES`, is
refused in one line before any Python object is built.
"""

from __future__ import annotations

import yaml

from drmas.errors import ConfigError

#: a profile is about 200 nodes and 5 kB, the paper's about 600 nodes; these leave room
MAX_NODES = 100_000
MAX_BYTES = 2 * 1024 * 1024


def expanded_size(node: yaml.Node, memo: dict[int, int] | None = None) -> int:
    """The number of nodes a walk over `node` visits, every alias expanded."""
    memo = {} if memo is None else memo
    key = id(node)
    if key in memo:
        return memo[key]
    memo[key] = 1       # a cycle (an anchor used inside itself) counts once, not forever
    if isinstance(node, yaml.MappingNode):
        size = 1 + sum(expanded_size(k, memo) + expanded_size(v, memo) for k, v in node.value)
    elif isinstance(node, yaml.SequenceNode):
        size = 1 + sum(expanded_size(v, memo) for v in node.value)
    else:
        size = 1
    memo[key] = size
    return size


def load_bounded(text: str, where: str):
    """The YAML document in `text` (None when empty), refused with one ConfigError line naming
    `where` when it is too large or expands to too many nodes. YAML syntax errors propagate
    as yaml.YAMLError, for the caller to place (file:line:column)."""
    if len(text) > MAX_BYTES:
        raise ConfigError(f"{where}: {len(text):,} characters of YAML, more than the "
                          f"{MAX_BYTES:,} a config file may hold")
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = expanded_size(node)
        if size > MAX_NODES:
            raise ConfigError(f"{where}: expands to {size:,} YAML nodes with its aliases (*name) "
                              f"expanded, more than {MAX_NODES:,}; write the values out instead "
                              "of repeating anchors")
        return loader.construct_document(node)
    except RecursionError:       # PyYAML composes and builds nested collections recursively
        raise ConfigError(f"{where}: YAML nested too deeply (hundreds of levels of lists or "
                          "mappings); no config needs more than a few") from None
    finally:
        loader.dispose()
