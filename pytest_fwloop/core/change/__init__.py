"""Reading and building diffs: the strict diff reader, a coder's loose diffs and edits placed
by their lines, POSIX paths as git spells them."""
