"""Checks on every answer: is it in the target language, complete, not an echo, a loop or cut short."""
