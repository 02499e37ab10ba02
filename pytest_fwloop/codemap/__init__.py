"""The tree's code as a model is sent it (DESIGN.md §16): symbols parsed with tree-sitter, kept in
an index under `.fwloop/`. Controller side only; plain pytest imports none of it."""
