print("drawtogether: being written")
