"""The order in which a backward pass runs the nodes of a graph: a pre-hook on every node records it."""


def node_order(loss, label=lambda node: node.name()) -> list[str]:
    """`label(node)` of each node of `loss`'s graph, in the order `loss.backward()` runs them (torch or modulecraft)."""
    order, stack, seen = [], [loss.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        node.register_prehook(lambda grad_outputs, label=label(node): order.append(label))
        stack.extend(following for following, _ in node.next_functions)
    loss.backward()
    return order
