"""Text as the client and the replica both cut it: placeholders, and long texts into segments."""
