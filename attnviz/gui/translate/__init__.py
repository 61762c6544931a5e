"""The Translate tab's wing: the tab, its decode session, step table, token strips and the search explorer."""
