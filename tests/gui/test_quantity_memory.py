"""The Quantity choice beyond one step (issue 27): the grid's tiles of a signed attribution use the diverging scale
centred on zero, as the large map does; the quantity chosen, its settings and the toggles are remembered across
restarts (QSettings, as the tab's other choices), dropping what the engine does not offer."""

from attnviz.gui.attention.colormap import to_image
from attnviz.gui.main_window import MainWindow
from tests.gui.conftest import translate
from tests.gui.test_quantities import SENTENCE, ready


def test_grid_tiles_of_a_signed_attribution_use_the_diverging_scale(qtbot, loaded):
    translate(qtbot, loaded, SENTENCE)
    tab = ready(qtbot, loaded, "gradient-x-input")
    panel = tab.attention
    maps = panel._source.maps(panel.kind, panel._step, panel.merged)
    assert maps is not None and maps.min() < 0  # gradient x input is signed
    assert panel.heatmap.data().signed
    tile = panel.grid._images[0][0]
    assert tile == to_image(maps[0, 0], True, signed=True)
    assert tile != to_image(maps[0, 0], True, signed=False)
    tab.quantity.choose("attention")
    weights = panel._source.maps(panel.kind, panel._step, panel.merged)
    assert panel.grid._images[0][0] == to_image(weights[0, 0], panel.per_map, signed=False)  # weights: viridis


def test_the_quantity_and_its_settings_are_remembered(qtbot, loaded, settings, toy_checkpoint):
    translate(qtbot, loaded, SENTENCE)
    tab = ready(qtbot, loaded, "integrated-gradients")
    tab.quantity._on_bar_setting_changed("steps", 64)
    tab.quantity.bar.sinks_check.setChecked(True)
    tab.topk_view.foil.emit("w1")  # a foil belongs to its sentence: not remembered
    tab.save_settings(settings)
    again = MainWindow(settings)
    qtbot.addWidget(again)
    again.load_model(toy_checkpoint)
    qtbot.waitUntil(lambda: again.translator is not None, timeout=20000)
    wanted = again.translate_tab.quantity.wanted
    assert wanted.key == "integrated-gradients" and dict(wanted.settings) == {"steps": 64}
    assert again.translate_tab.quantity.bar.sinks_hidden and not again.translate_tab.quantity.bar.beside


def test_remembered_values_the_engine_does_not_offer_are_dropped(qtbot, settings, toy_checkpoint):
    settings.setValue("translate/quantity", "no-such-method")
    settings.setValue("translate/quantitySettings", '{"integrated-gradients": {"steps": 7, "baseline": "zero"}}')
    window = MainWindow(settings)
    qtbot.addWidget(window)
    window.load_model(toy_checkpoint)
    qtbot.waitUntil(lambda: window.translator is not None, timeout=20000)
    control = window.translate_tab.quantity
    assert control.wanted.key == "attention"
    control.choose("integrated-gradients")
    assert control.wanted.settings.get("steps") is None  # 7 is not among 16-128
    settings.setValue("translate/quantitySettings", "{not json")
    control.restore_settings(settings)
    assert control._settings == {}
