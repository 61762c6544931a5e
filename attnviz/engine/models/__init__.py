"""The networks behind the registered model kinds (torch): the shared protocol and one module per network.

Which kinds exist, and everything said about them, lives in ``attnviz.engine.kinds``; nothing here names a kind.
"""
