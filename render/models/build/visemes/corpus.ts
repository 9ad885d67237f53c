/**
 * Sentence corpus for the audio-to-viseme model, written for this project (no downloaded text).
 * HELDOUT sentences are never used for training or tuning: they measure the model (evaluate.ts, and the
 * floor asserted in render/visemes/audio.test.ts). TRAIN = the other hand-written sentences plus
 * sentences generated from templates whose word lists do not matter for the held-out set.
 */

const WRITTEN = [
  'Please call Stella and ask her to bring these things with her from the store.',
  'The quick brown fox jumps over the lazy dog near the riverbank.',
  'My mother bought a big blue bag at the market on Monday morning.',
  'Would you like a cup of coffee or a glass of orange juice?',
  'We moved to a small village by the sea when I was nine years old.',
  'She sells seashells by the seashore every summer afternoon.',
  'Thank you for calling, how may I help you today?',
  'The thunderstorm knocked out the power for three whole hours.',
  'Put the pepper, butter and bread back in the cupboard, please.',
  'I think the theater opens at eight thirty on Thursday.',
  'Vivid violet flowers grew along the old wooden fence.',
  'The judge charged the jury with a challenging choice.',
  'Measure the treasure before you leave the garage.',
  'Rolling rivers rush through rugged rocky regions.',
  'Look at the moon, it is full and bright tonight.',
  'Few people knew how to fix the huge machine in the factory.',
  'Could you open the window a little, it is warm in here.',
  'Go ahead and order whatever you want, the food is on me.',
  'Our team won the game by a single point in overtime.',
  'He whispered something, but nobody could hear a word.',
  'Bob bought a bunch of bananas and a bottle of milk.',
  'Seven silly sheep slept soundly in the shade.',
  'Why would anyone walk home in weather like this?',
  'The yellow yacht sailed away before the sun came up.',
  'I usually read the news while eating breakfast.',
  'Please remember to water the plants while I am away.',
  'The children played outside until it got too dark to see.',
  'A good night of sleep makes a huge difference.',
  'The museum has an amazing collection of ancient maps.',
  'Every autumn the leaves turn orange, red and gold.',
  'The pilot announced that we would land in twenty minutes.',
  'Fresh bread smells wonderful early in the morning.',
  'The doctor said I should drink more water and rest.',
  'Do not forget to lock the door when you leave.',
  'My phone battery died right in the middle of the call.',
  'Can you believe how fast this year went by?',
  'The cat jumped onto the table and knocked over a vase.',
  'He plays the guitar, the piano and a little violin.',
  'We should meet for lunch sometime next week.',
  'The new bridge will connect both sides of the valley.',
  'I have never seen so many stars in the sky.',
  'The package should arrive on Tuesday or Wednesday.',
  'Shut the gate so the goats do not get out again.',
  'A warm bath and a good book, that is my idea of fun.',
  'Both of them thought the answer was obvious.',
  'Zebras and giraffes wandered across the dusty plain.',
  'Nobody expected the show to be such a huge success.',
  'Mix the flour, sugar and eggs in a large bowl.',
  'The bus was late again, so I walked to work.',
  'This is the best pizza I have ever tasted.',
  'Her voice echoed through the empty hallway.',
  'Keep your eyes on the road and both hands on the wheel.',
  'It took us almost an hour to find a parking spot.',
  'The manager approved the budget for next quarter.',
  'Quiet please, the baby is finally asleep.',
  'I would rather stay home and watch a movie.',
  'The ocean looked calm, but the current was strong.',
  'How much does a ticket to Boston cost these days?',
  'Maybe we can fix it with a bit of glue and tape.',
  'They painted the kitchen a bright shade of yellow.',
  'Each player gets five cards at the start of the game.',
  'Thousands of birds flew south over the frozen lake.',
  'I forgot my umbrella, and of course it started to rain.',
  'The chef chopped the onions with a very sharp knife.',
  'Our flight was delayed because of heavy fog.',
  'Jump, jog and jiggle until you feel the energy.',
  'Pay attention to the details, they matter a lot.',
  'The engineer checked every wire twice before starting.',
  'Whose jacket is this, and why is it on the floor?',
  'I am sorry, I did not catch your name.',
  'Wash your hands before you touch the food.',
  'Many hands make light work, as my grandmother used to say.',
  'The ship vanished into the thick morning mist.',
  'Mumbling made the message much more confusing.',
  'The usual route was closed, so we took the highway.',
  'A loud bang made everybody in the room jump.',
  'The vote will take place on the first of June.',
  'Good things come to those who wait, or so they say.',
  'The old man sat on the bench and fed the pigeons.',
  'Sue threw the blue shoe into the pool.',
  'Oh no, I left my keys in the car again.',
  'It is a beautiful day for a walk in the park.',
  'The report shows a sharp rise in profits this year.',
  'Choose a number between one and ten.',
  'My brother builds model boats in his spare time.',
  'That was the loudest thunder I have ever heard.',
  'Please hold the line while I transfer your call.',
  'The farmer fed the pigs and milked the cows.',
  'We watched the fireworks from the roof of the hotel.',
  'Honestly, I have no idea what happened next.',
  'Twelve twins twirled twelve twigs in the twilight.',
  'Pack a warm sweater, the evenings get chilly.',
  'The scientist measured the speed of the sound wave.',
  'Visiting the zoo was the highlight of the trip.',
  'Her garden is full of roses, tulips and lilies.',
  'The bakery on the corner sells the best muffins.',
  'Bring me the map, the compass and a flashlight.',
  'If it rains tomorrow, we will stay inside and play cards.',
  'The painter mixed blue and yellow to make green.',
  'Which way is the train station from here?',
  'Push the button twice to turn the machine off.',
  'I hope you enjoy your stay with us.',
  'The boy threw the ball over the fence by mistake.',
  'She measured the room and ordered a new carpet.',
  'The wolf howled at the moon all night long.',
  'Open your books to page forty two.',
  'Time flies when you are having fun.',
  'He booked a room with a view of the mountains.',
  'The soup needs a pinch of salt and some pepper.',
  'Everyone agreed that the plan was worth a try.',
  'Let me know if you need anything else.',
  'We found a tiny puppy shivering under the porch.',
  'The lecture covered physics, chemistry and biology.',
  'Mister Smith will see you in a moment.',
  'The hikers reached the summit just before noon.',
  'Bake the cake for about forty minutes.',
  'I wonder why the sky looks so orange tonight.',
  'A thousand thanks for your help with the move.',
  'The shop closes at six on weekdays and five on Sundays.',
  'Fetch the broom and sweep up the broken glass.',
  'Your appointment has been moved to Friday at noon.',
  'The vet said the dog is healthy and happy.',
  'Whatever happens, keep calm and carry on.',
  'My favourite season is spring, when everything blooms.',
  'Jane joined the choir and sings every Sunday.',
  'The mountain road twists and turns for miles.',
  'We are out of milk, eggs and bread.',
  'Could you please repeat the question?',
  'The wind blew the hat right off his head.',
];

/** Every other hand-written sentence, 64 in all: the held-out set (never trained on or tuned with). */
export const HELDOUT_SENTENCES: readonly string[] = WRITTEN.filter((_, i) => i % 2 === 1);

const subjects = ['The teacher', 'My neighbour', 'A young doctor', 'The old sailor', 'Our driver', 'The small child', 'His uncle', 'The waitress', 'A famous singer', 'The farmer', 'My cousin', 'The police officer', 'A quiet student', 'The mayor', 'Her father', 'The shopkeeper'];
const verbs = ['quickly found', 'carefully painted', 'proudly showed', 'suddenly dropped', 'happily shared', 'slowly moved', 'never liked', 'often borrowed', 'barely noticed', 'gently pushed', 'fixed', 'washed', 'described', 'forgot', 'delivered', 'measured'];
const objects = ['the heavy wooden box', 'a bright purple umbrella', 'the broken bicycle', 'an enormous pumpkin', 'the shiny silver key', 'a bowl of hot soup', 'the fishing boat', 'a stack of old magazines', 'the muddy boots', 'a jar of peach jam', 'the photo album', 'a very loud trumpet', 'the cheese sandwich', 'the thick rope', 'a pair of leather gloves', 'the vegetable garden'];
const tails = ['before lunch', 'in the garage', 'near the bridge', 'on Thursday evening', 'after the storm', 'without asking anyone', 'at the village fair', 'during the break', 'behind the shed', 'for the third time', 'with a big smile', 'in front of everyone', 'by the fountain', 'yesterday morning', 'just in time', 'on the way home'];
const questions = ['Where did you put', 'Why did you buy', 'Who gave you', 'When will you return', 'How did you fix', 'Have you seen', 'Did anyone move', 'Can you bring me'];
const numbers = ['one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten', 'eleven', 'twelve', 'fifteen', 'twenty', 'thirty', 'fifty', 'ninety', 'a hundred'];
const things = ['apples', 'boxes', 'chairs', 'dollars', 'feathers', 'guitars', 'hammers', 'jackets', 'kittens', 'lemons', 'maps', 'notebooks', 'oranges', 'pencils', 'queens', 'rulers', 'shovels', 'tickets', 'umbrellas', 'violins', 'watches', 'yogurts', 'zippers'];

function generated(): string[] {
  const out: string[] = [];
  // Deterministic walk through the combinations (coprime strides), so the corpus never changes.
  for (let i = 0; i < 150; i++) {
    const r = Math.floor(i / 16);
    const s = subjects[i % 16];
    const v = verbs[(i + 3 * r) % 16];
    const o = objects[(5 * i + r + 1) % 16];
    const t = tails[(3 * i + 7 * r + 2) % 16];
    out.push(`${s} ${v} ${o} ${t}.`);
  }
  for (let i = 0; i < 48; i++) {
    const q = questions[i % 8];
    const o = objects[(i + Math.floor(i / 8) * 3) % 16];
    out.push(`${q} ${o}?`);
  }
  for (let i = 0; i < 40; i++) {
    const n = numbers[i % 18];
    const t = things[(i * 7 + 2) % 23];
    const n2 = numbers[(i * 5 + 3) % 18];
    const t2 = things[(i * 11 + 5) % 23];
    out.push(`We counted ${n} ${t} and ${n2} ${t2} in the back room.`);
  }
  return out;
}

export const TRAIN_SENTENCES: readonly string[] = [...WRITTEN.filter((_, i) => i % 2 === 0), ...generated()];
