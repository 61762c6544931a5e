"""The desktop app: the only package that imports PySide6. Widgets are views over engine events."""
