"""The Translate tab's words per mode (gui.translate.mode): plain data, checked without a window."""

from dataclasses import fields

from attnviz.session.translate.mode import mode_texts


def test_translating_names_the_source_language_and_generating_names_the_prefix():
    translating, generating = mode_texts(False, "German", True), mode_texts(True, "", True)
    assert translating.source_label == "German &sentence:" and translating.button == "Tr&anslate"
    assert translating.placeholder == "Type a German sentence and press Enter"
    assert generating.source_label == "&Start with:" and generating.button == "Gener&ate"
    assert generating.source_name == "Prefix to continue" and "characters" in generating.output_placeholder
    # every text changes with the mode, so none is left over from the previous model
    assert all(getattr(translating, f.name) != getattr(generating, f.name) for f in fields(translating))


def test_before_a_model_is_loaded_the_input_says_so():
    for generating in (False, True):
        assert mode_texts(generating, "French", False).placeholder == "Loading model..."
    assert mode_texts(False, "", True).source_label == "Source &sentence:"  # no language known
