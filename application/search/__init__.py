"""Search: scanning a session's texts, the word-sketch index and its persistent view."""
