# Passes when the greeting is where load_artifact put it and says hello.
grep -q hello hello.txt
