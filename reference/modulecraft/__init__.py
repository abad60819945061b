"""modulecraft: rebuild torch.nn.Module with numpy."""
