print("huddle-bench: being written")
