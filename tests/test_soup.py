"""training.soup: the uniform average of state dicts and the greedy choice of ingredients, on tiny hand-made cases."""
import pytest
import torch

from training import soup


def test_average_of_identical_dicts_is_the_dict():
    state = {"w": torch.tensor([[1.5, -2.0], [0.25, 4.0]]), "b": torch.tensor([0.1, -0.3])}
    averaged = soup.average([state, dict(state), dict(state)])
    assert averaged.keys() == state.keys()
    for key in state:
        torch.testing.assert_close(averaged[key], state[key])


def test_uniform_average_matches_hand_computation():
    first = {"w": torch.tensor([[1.0, 2.0]]), "b": torch.tensor([0.0])}
    second = {"w": torch.tensor([[3.0, -2.0]]), "b": torch.tensor([1.0])}
    third = {"w": torch.tensor([[2.0, 3.0]]), "b": torch.tensor([-4.0])}
    averaged = soup.average([first, second, third])
    torch.testing.assert_close(averaged["w"], torch.tensor([[2.0, 1.0]]))  # (1+3+2)/3, (2-2+3)/3
    torch.testing.assert_close(averaged["b"], torch.tensor([-1.0]))  # (0+1-4)/3


def test_average_is_float32_even_from_half_precision():
    averaged = soup.average([{"w": torch.tensor([1.0], dtype=torch.bfloat16)},
                             {"w": torch.tensor([2.0], dtype=torch.bfloat16)}])
    assert averaged["w"].dtype == torch.float32
    torch.testing.assert_close(averaged["w"], torch.tensor([1.5]))


def test_average_refuses_mismatched_keys():
    with pytest.raises(ValueError, match="parameters differ"):
        soup.average([{"w": torch.zeros(2)}, {"v": torch.zeros(2)}])


def test_average_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match="shape"):
        soup.average([{"w": torch.zeros(2, 3)}, {"w": torch.zeros(3, 2)}])


def test_average_refuses_nothing():
    with pytest.raises(ValueError):
        soup.average([])


def test_greedy_keeps_an_ingredient_only_when_the_score_rises():
    scores = {("a",): 0.80, ("a", "b"): 0.79, ("a", "c"): 0.83, ("a", "c", "d"): 0.83, ("a", "c", "e"): 0.85}
    tried = []

    def score(ingredients):
        tried.append(tuple(ingredients))
        return scores[tuple(ingredients)]

    chosen, best = soup.greedy(["a", "b", "c", "d", "e"], score)
    assert chosen == ["a", "c", "e"]  # b lowers the score, d only ties it (fewer models kept)
    assert best == 0.85
    assert tried == [("a",), ("a", "b"), ("a", "c"), ("a", "c", "d"), ("a", "c", "e")]


def test_greedy_of_one_ingredient_is_that_ingredient():
    assert soup.greedy(["only"], lambda ingredients: 0.5) == (["only"], 0.5)
