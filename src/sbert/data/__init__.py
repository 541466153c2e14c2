"""Readers for the data formats sbert consumes; each error names the file and the line."""
