"""Editing a kernel's notebook: versioned cell edits and the re-run plan they change."""
