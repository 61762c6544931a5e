"""The Translate tab's wing: the tab, its decode document, step table, token strips and the search explorer."""
