from ipykeep.entry import main

main()
