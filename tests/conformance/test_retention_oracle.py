from conformance.checks.check_retention import MISSING, oracle


def test_keep_best_and_latest():
    assert oracle([3.0, 1.0, 2.0], 1, "max", True) == ([2, 0], [0])


def test_without_attribute_keeps_most_recent():
    assert oracle([5.0, 1.0, 2.0, 0.0], 2, "max", False) == ([2, 3], [2, 3])


def test_min_order_and_ties_later_is_better():
    kept, best = oracle([1.0, 1.0, 2.0], 2, "min", True)
    assert kept == [2, 0, 1] and best == [0, 1]  # 2.0 is worst under min; tie: 1 beats 0


def test_missing_score_is_minus_inf_before_order():
    assert oracle([2.0, MISSING, 1.0], 1, "max", True)[0] == [2, 0]
    # under 'min' the negated -inf is the best score there is
    assert oracle([2.0, MISSING, 1.0], 1, "min", True)[0] == [2, 1]


def test_keep_all():
    assert oracle([1.0, 3.0, 2.0], None, "max", True) == ([0, 2, 1], [0, 2, 1])
