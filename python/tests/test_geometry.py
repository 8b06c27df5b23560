import pytest

import ladder


def test_muse_glimmer_preset():
    g = ladder.Geometry.muse_glimmer()
    assert (g.n_layers, g.n_heads, g.n_kv_heads, g.head_dim) == (52, 32, 2, 128)
    assert (g.window, g.max_context) == (2048, 131072)
    assert g.count_layers("swa") == 39 and g.count_layers("nope") == 13
    assert [g.layer_class(i) for i in range(8)] == ["swa", "swa", "swa", "nope"] * 2
    assert g.kv_bytes_per_token_layer == 1024
    assert g.heads_per_kv == 16
    assert g.scale == pytest.approx(1 / 128**0.5)


def test_visible_is_k3():
    g = ladder.Geometry.muse_glimmer()
    assert g.visible("swa", 0) == 1
    assert g.visible("swa", 2047) == 2048
    assert g.visible("swa", 5000) == 2048
    assert g.visible("nope", 5000) == 5001


def test_custom_geometry_validates():
    g = ladder.Geometry(n_layers=4, n_heads=12, n_kv_heads=4, head_dim=64, window=96, max_context=1024,
                        nope_period=2, nope_phase=1)
    assert [g.layer_class(i) for i in range(4)] == ["swa", "nope", "swa", "nope"]
    with pytest.raises(ladder.InvalidArgumentError, match="multiple of n_kv_heads"):
        ladder.Geometry(n_layers=4, n_heads=10, n_kv_heads=4, head_dim=64, window=96, max_context=1024)
    with pytest.raises(ValueError):
        ladder.Geometry(n_layers=0, n_heads=8, n_kv_heads=2, head_dim=64, window=96, max_context=1024)


def test_validate_after_mutation():
    g = ladder.Geometry.muse_glimmer()
    g.n_kv_heads = 3
    with pytest.raises(ladder.InvalidArgumentError):
        g.validate()


def test_layer_out_of_range_and_bad_class():
    g = ladder.Geometry.muse_glimmer()
    with pytest.raises(ladder.InvalidArgumentError, match="does not exist"):
        g.layer_class(52)
    with pytest.raises(ValueError, match="'swa' or 'nope'"):
        g.visible("global", 3)


def test_error_hierarchy():
    assert issubclass(ladder.ShapeError, ValueError)
    assert issubclass(ladder.DTypeError, ValueError)
    assert issubclass(ladder.PositionError, ValueError)
    assert issubclass(ladder.DeviceMismatchError, ValueError)
    assert issubclass(ladder.NoDeviceError, RuntimeError)
    assert issubclass(ladder.DeviceError, RuntimeError)
    for cls in (ladder.ShapeError, ladder.NoDeviceError, ladder.OutOfMemoryError):
        assert issubclass(cls, ladder.LadderError)
