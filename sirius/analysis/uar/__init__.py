"""The unified dependence graph (UAR): statements, effects, dependences and their widths."""
