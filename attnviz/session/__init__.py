"""What a session with a model holds, without Qt: the decode document and its changes, the quantities computed on
a translation and what the attention panel reads of them, the Train and Analysis tabs' run documents, the models
the picker offers. The GUI (``attnviz.gui``) subscribes to these documents and draws them; the notebook API and the
tests drive the same documents without a window. A contract keeps Qt out of this package."""
