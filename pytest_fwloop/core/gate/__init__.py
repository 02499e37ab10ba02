"""What may be applied or run: the patch policy, the gate's rules and order, repeats, risky
code, the pre-check, the review panel, the allowlist and its tool grammars."""
