print("hello from the image")
