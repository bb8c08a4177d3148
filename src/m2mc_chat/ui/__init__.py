"""Textual widgets and screens of the chat. Importing this package imports textual."""
