"""The API dialects the replica speaks, one module each: parse -> one translation core call -> render."""
